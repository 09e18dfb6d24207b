// reelay chat and videos compatibility check with the official Go library github.com/openai/openai-go.
//
// Env: REELAY_BASE_URL ({base}/api/compat), REELAY_API_KEY, REELAY_CHAT_MODELS ("model=expected reply prefix|...").
// Prints one PASS/FAIL line per check; exits 1 if any check failed.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

var failures = 0

func check(name string, fn func() error) {
	if err := fn(); err != nil {
		failures++
		fmt.Printf("FAIL go %s: %v\n", name, err)
		return
	}
	fmt.Printf("PASS go %s\n", name)
}

func expect(actual, expected, what string) error {
	if actual != expected {
		return fmt.Errorf("%s: expected %q, got %q", what, expected, actual)
	}
	return nil
}

func main() {
	baseURL, apiKey := os.Getenv("REELAY_BASE_URL"), os.Getenv("REELAY_API_KEY")
	models := os.Getenv("REELAY_CHAT_MODELS")
	if models == "" {
		models = "echo="
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey(apiKey), option.WithMaxRetries(0))
	firstModel := ""

	for _, entry := range strings.Split(models, "|") {
		model, prefix, _ := strings.Cut(entry, "=")
		if firstModel == "" {
			firstModel = model
		}
		check("single-turn ["+model+"]", func() error {
			reply, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:    model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello from go")},
			})
			if err != nil {
				return err
			}
			if reply.Usage.CompletionTokens <= 0 {
				return fmt.Errorf("usage missing: %+v", reply.Usage)
			}
			return expect(reply.Choices[0].Message.Content, prefix+"hello from go", "reply")
		})
		check("multi-turn ["+model+"]", func() error {
			reply, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: model,
				Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("you are terse"),
					openai.UserMessage("first"),
					openai.AssistantMessage("ok"),
					openai.UserMessage("second turn"),
				},
			})
			if err != nil {
				return err
			}
			return expect(reply.Choices[0].Message.Content, prefix+"second turn", "reply")
		})
		check("streaming ["+model+"]", func() error {
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model:         model,
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream this please")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			var text strings.Builder
			chunks, usageSeen := 0, false
			for stream.Next() {
				chunk := stream.Current()
				chunks++
				if len(chunk.Choices) > 0 {
					text.WriteString(chunk.Choices[0].Delta.Content)
				}
				if chunk.Usage.CompletionTokens > 0 {
					usageSeen = true
				}
			}
			if err := stream.Err(); err != nil {
				return err
			}
			if chunks < 3 || !usageSeen {
				return fmt.Errorf("expected several chunks and a usage chunk, got %d chunks, usage seen %v", chunks, usageSeen)
			}
			return expect(text.String(), prefix+"stream this please", "streamed text")
		})
	}
	check("bad-key", func() error {
		stranger := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("rly_not-a-key"), option.WithMaxRetries(0))
		_, err := stranger.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    firstModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			return fmt.Errorf("expected an API error, got %v", err)
		}
		if apiErr.StatusCode != 401 {
			return fmt.Errorf("expected status 401, got %d", apiErr.StatusCode)
		}
		return nil
	})
	checkVideos(ctx, baseURL, apiKey)
	if failures > 0 {
		os.Exit(1)
	}
}

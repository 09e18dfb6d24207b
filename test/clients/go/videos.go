package main

// reelay's OpenAI Videos API with the official Go library (client.Videos): create with an input_reference
// file, poll until completed, download the content, list, remix, delete, and the API errors by status.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

// namedReader gives the SDK a file name and type for the multipart part.
type namedReader struct {
	io.Reader
	name, contentType string
}

func (r namedReader) Filename() string    { return r.name }
func (r namedReader) ContentType() string { return r.contentType }

func waitForCompleted(ctx context.Context, client openai.Client, id string) (*openai.Video, error) {
	for i := 0; i < 600; i++ {
		video, err := client.Videos.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if video.Status == openai.VideoStatusCompleted || video.Status == openai.VideoStatusFailed {
			return video, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s did not finish", id)
}

func statusOf(err error) int {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

func checkVideos(ctx context.Context, baseURL, apiKey string) {
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey(apiKey), option.WithMaxRetries(0))
	png, _ := base64.StdEncoding.DecodeString(onePixelPNG)
	var videoID string
	check("videos: create with input_reference, retrieve until completed, download the MP4", func() error {
		video, err := client.Videos.New(ctx, openai.VideoNewParams{
			Model:          "VideoModel-2.0",
			Prompt:         "a fox from go",
			Seconds:        openai.VideoSeconds4,
			Size:           openai.VideoSize1280x720,
			InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: namedReader{bytes.NewReader(png), "first-frame.png", "image/png"}},
		})
		if err != nil {
			return err
		}
		done, err := waitForCompleted(ctx, client, video.ID)
		if err != nil {
			return err
		}
		if err := expect(string(done.Status), "completed", "status"); err != nil {
			return err
		}
		videoID = video.ID
		content, err := client.Videos.DownloadContent(ctx, video.ID, openai.VideoDownloadContentParams{})
		if err != nil {
			return err
		}
		defer content.Body.Close()
		body, err := io.ReadAll(content.Body)
		if err != nil {
			return err
		}
		if len(body) < 8 || string(body[4:8]) != "ftyp" {
			return fmt.Errorf("the content is not an MP4 (%d bytes)", len(body))
		}
		return expect(content.Header.Get("content-type"), "video/mp4", "content type")
	})
	check("videos: list finds it", func() error {
		page, err := client.Videos.List(ctx, openai.VideoListParams{})
		if err != nil {
			return err
		}
		for _, video := range page.Data {
			if video.ID == videoID {
				return nil
			}
		}
		return fmt.Errorf("%s not in the first page", videoID)
	})
	check("videos: remix", func() error {
		remix, err := client.Videos.Remix(ctx, videoID, openai.VideoRemixParams{Prompt: "the same fox at night"})
		if err != nil {
			return err
		}
		return expect(remix.RemixedFromVideoID, videoID, "remixed_from_video_id")
	})
	check("videos: delete, then not found", func() error {
		deleted, err := client.Videos.Delete(ctx, videoID)
		if err != nil {
			return err
		}
		if !deleted.Deleted {
			return fmt.Errorf("deleted is false")
		}
		if _, err := client.Videos.Get(ctx, videoID); statusOf(err) != http.StatusNotFound {
			return fmt.Errorf("expected 404 after delete, got %v", err)
		}
		return nil
	})
	check("videos: a size reelay does not render is a 400 naming the sizes", func() error {
		_, err := client.Videos.New(ctx, openai.VideoNewParams{Model: "VideoModel-2.0", Prompt: "x", Size: openai.VideoSize1024x1792})
		if statusOf(err) != http.StatusBadRequest {
			return fmt.Errorf("expected 400, got %v", err)
		}
		return nil
	})
}

package reelay;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.StreamResponse;
import com.openai.errors.UnauthorizedException;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.ChatCompletionStreamOptions;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * reelay chat and videos compatibility check with the official Java library com.openai:openai-java.
 *
 * <p>Env: REELAY_BASE_URL ({base}/api/compat), REELAY_API_KEY, REELAY_CHAT_MODELS ("model=expected reply prefix|...").
 * Prints one PASS/FAIL line per check; exits 1 if any check failed.
 */
public final class CheckChat {
  private static int failures = 0;

  interface Check {
    void run() throws Exception;
  }

  /** How CheckVideos reports its checks through this class's counter. */
  interface Checker {
    void check(String name, Check check);
  }

  private static void check(String name, Check check) {
    try {
      check.run();
      System.out.println("PASS java " + name);
    } catch (Exception | AssertionError error) {
      failures++;
      System.out.println("FAIL java " + name + ": " + error.getClass().getSimpleName() + ": " + error.getMessage());
    }
  }

  private static void expect(String actual, String expected, String what) {
    if (!expected.equals(actual)) {
      throw new AssertionError(what + ": expected \"" + expected + "\", got \"" + actual + "\"");
    }
  }

  private static OpenAIClient client(String baseUrl, String apiKey) {
    return OpenAIOkHttpClient.builder().baseUrl(baseUrl).apiKey(apiKey).maxRetries(0).timeout(Duration.ofSeconds(30)).build();
  }

  public static void main(String[] args) {
    String baseUrl = System.getenv("REELAY_BASE_URL");
    String apiKey = System.getenv("REELAY_API_KEY");
    String models = System.getenv().getOrDefault("REELAY_CHAT_MODELS", "echo=");
    OpenAIClient client = client(baseUrl, apiKey);
    String firstModel = null;

    for (String entry : models.split("\\|")) {
      String model = entry.substring(0, entry.indexOf('='));
      String prefix = entry.substring(entry.indexOf('=') + 1);
      if (firstModel == null) firstModel = model;

      check("single-turn [" + model + "]", () -> {
        ChatCompletion reply = client.chat().completions().create(
            ChatCompletionCreateParams.builder().model(model).addUserMessage("hello from java").build());
        expect(reply.choices().get(0).message().content().orElse(null), prefix + "hello from java", "reply");
        if (reply.usage().map(u -> u.completionTokens()).orElse(0L) <= 0) throw new AssertionError("usage missing");
      });
      check("multi-turn [" + model + "]", () -> {
        ChatCompletion reply = client.chat().completions().create(ChatCompletionCreateParams.builder()
            .model(model)
            .addSystemMessage("you are terse")
            .addUserMessage("first")
            .addAssistantMessage("ok")
            .addUserMessage("second turn")
            .build());
        expect(reply.choices().get(0).message().content().orElse(null), prefix + "second turn", "reply");
      });
      check("streaming [" + model + "]", () -> {
        ChatCompletionCreateParams params = ChatCompletionCreateParams.builder()
            .model(model)
            .addUserMessage("stream this please")
            .streamOptions(ChatCompletionStreamOptions.builder().includeUsage(true).build())
            .build();
        StringBuilder text = new StringBuilder();
        AtomicInteger chunks = new AtomicInteger();
        AtomicBoolean usageSeen = new AtomicBoolean();
        try (StreamResponse<ChatCompletionChunk> stream = client.chat().completions().createStreaming(params)) {
          stream.stream().forEach(chunk -> {
            chunks.incrementAndGet();
            chunk.choices().forEach(choice -> choice.delta().content().ifPresent(text::append));
            if (chunk.usage().isPresent()) usageSeen.set(true);
          });
        }
        if (chunks.get() < 3 || !usageSeen.get()) {
          throw new AssertionError("expected several chunks and a usage chunk, got " + chunks.get() + " chunks, usage seen " + usageSeen.get());
        }
        expect(text.toString(), prefix + "stream this please", "streamed text");
      });
    }

    String model = firstModel;
    check("bad-key", () -> {
      try {
        client(baseUrl, "rly_not-a-key").chat().completions().create(
            ChatCompletionCreateParams.builder().model(model).addUserMessage("x").build());
      } catch (UnauthorizedException error) {
        if (error.statusCode() != 401) throw new AssertionError("status " + error.statusCode());
        return;
      }
      throw new AssertionError("a bad key was accepted");
    });
    CheckVideos.run(client(baseUrl, apiKey), CheckChat::check);
    System.exit(failures > 0 ? 1 : 0);
  }
}

package reelay;

import com.openai.client.OpenAIClient;
import com.openai.core.http.HttpResponse;
import com.openai.errors.BadRequestException;
import com.openai.errors.NotFoundException;
import com.openai.models.videos.Video;
import com.openai.models.videos.VideoCreateParams;
import com.openai.models.videos.VideoRemixParams;
import com.openai.models.videos.VideoSeconds;
import com.openai.models.videos.VideoSize;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;

/** reelay's OpenAI Videos API with the official Java library (client.videos()): run by CheckChat after its chat checks. */
final class CheckVideos {
  private static final String ONE_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

  private CheckVideos() {}

  private static Video waitForCompleted(OpenAIClient client, String id) throws InterruptedException {
    for (int i = 0; i < 600; i++) {
      Video video = client.videos().retrieve(id);
      if (video.status().equals(Video.Status.COMPLETED) || video.status().equals(Video.Status.FAILED)) return video;
      Thread.sleep(50);
    }
    throw new AssertionError(id + " did not finish");
  }

  static void run(OpenAIClient client, CheckChat.Checker check) {
    String[] videoId = {null};
    check.check("videos: create with input_reference, retrieve until completed, download the MP4", () -> {
      // A file path: the library names the multipart part after it (a bare byte[] goes without a file name).
      Path image = Files.createTempFile("first-frame", ".png");
      Files.write(image, Base64.getDecoder().decode(ONE_PIXEL_PNG));
      Video video = client.videos().create(VideoCreateParams.builder()
          .model("VideoModel-2.0").prompt("a fox from java").seconds(VideoSeconds._4).size(VideoSize._1280X720).inputReference(image).build());
      Video done = waitForCompleted(client, video.id());
      if (!done.status().equals(Video.Status.COMPLETED)) throw new AssertionError("status " + done.status());
      videoId[0] = video.id();
      try (HttpResponse content = client.videos().downloadContent(video.id()); InputStream body = content.body()) {
        byte[] bytes = body.readAllBytes();
        if (bytes.length < 8 || !new String(bytes, 4, 4, "ISO-8859-1").equals("ftyp")) throw new AssertionError("not an MP4: " + bytes.length + " bytes");
      }
    });
    check.check("videos: list finds it", () -> {
      if (client.videos().list().data().stream().noneMatch(video -> video.id().equals(videoId[0]))) throw new AssertionError(videoId[0] + " not listed");
    });
    check.check("videos: remix", () -> {
      Video remix = client.videos().remix(videoId[0], VideoRemixParams.builder().prompt("the same fox at night").build());
      if (!remix.remixedFromVideoId().orElse("").equals(videoId[0])) throw new AssertionError("remixed_from_video_id " + remix.remixedFromVideoId());
    });
    check.check("videos: delete, then not found", () -> {
      if (!client.videos().delete(videoId[0]).deleted()) throw new AssertionError("deleted is false");
      try {
        client.videos().retrieve(videoId[0]);
      } catch (NotFoundException expected) {
        return;
      }
      throw new AssertionError("a deleted video was found");
    });
    check.check("videos: a size reelay does not render is a BadRequestException", () -> {
      try {
        client.videos().create(VideoCreateParams.builder().model("VideoModel-2.0").prompt("x").size(VideoSize._1024X1792).build());
      } catch (BadRequestException expected) {
        return;
      }
      throw new AssertionError("an unknown size was accepted");
    });
  }
}

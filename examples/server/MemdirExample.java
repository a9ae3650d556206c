// memdir over HTTP from Java 17 (java.net.http), no libraries:
//   javac -d /tmp/memdir-java examples/server/MemdirExample.java
//   MEMDIR_URL=http://127.0.0.1:8000 MEMDIR_API_KEY=mdk_... java -cp /tmp/memdir-java MemdirExample acme.alice
// Adds a fact to a namespace and searches it; answers are JSON (printed as they come).

import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;

public final class MemdirExample {
    private final HttpClient http = HttpClient.newHttpClient();
    private final String base;
    private final String key;
    private final String namespace;

    private MemdirExample(String base, String key, String namespace) {
        this.base = base.replaceAll("/$", "");
        this.key = key;
        this.namespace = namespace;
    }

    private String call(String method, String path, String json) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder()
            .uri(URI.create(base + "/v1/namespaces/" + encode(namespace) + path))
            .header("Authorization", "Bearer " + key);
        if (json == null) {
            request.method(method, HttpRequest.BodyPublishers.noBody());
        } else {
            request.header("Content-Type", "application/json")
                .method(method, HttpRequest.BodyPublishers.ofString(json, StandardCharsets.UTF_8));
        }
        HttpResponse<String> response =
            http.send(request.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        if (response.statusCode() >= 400) {
            // An RFC 9457 problem document: its "detail" says what went wrong, in one line.
            throw new IllegalStateException(method + " " + path + ": " + response.statusCode() + " " + response.body());
        }
        return response.body();
    }

    private static String encode(String text) {
        return URLEncoder.encode(text, StandardCharsets.UTF_8).replace("+", "%20");
    }

    private static String jsonString(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                default -> out.append(c < 0x20 ? String.format("\\u%04x", (int) c) : String.valueOf(c));
            }
        }
        return out.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        String key = System.getenv("MEMDIR_API_KEY");
        if (key == null || args.length != 1) {
            System.err.println("usage: MEMDIR_API_KEY=mdk_... java MemdirExample NAMESPACE  (MEMDIR_URL: the server)");
            System.exit(2);
        }
        String url = System.getenv().getOrDefault("MEMDIR_URL", "http://127.0.0.1:8000");
        MemdirExample memdir = new MemdirExample(url, key, args[0]);
        String fact = "The harness agent's compaction keeps the last 20 messages (数据库迁移已完成)";
        System.out.println("added: " + memdir.call("POST", "/memories", "{\"text\": " + jsonString(fact) + "}"));
        System.out.println("found: " + memdir.call("GET", "/search?q=" + encode("compaction 数据库迁移") + "&limit=3", null));
    }
}

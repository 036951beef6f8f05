import java.lang.reflect.Field;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * DynamoDB Local with the same command-line options, but listening on 127.0.0.1 only (the jar has no host
 * option and binds every interface) on a port the system picks (no race for a "free" port): it prints
 * "listening 127.0.0.1:PORT" once it accepts connections. It exits when its standard input closes, so it dies
 * with the test run that started it even when that run is killed. Run from source: `java -cp <jar and libs>
 * LoopbackDynamoDbLocal.java -inMemory ...` (Java 11+ compiles it in memory; the JRE's modules suffice).
 */
public class LoopbackDynamoDbLocal {
  public static void main(String[] args) throws Exception {
    // The port option is required and range-checked; the connector's port is replaced by 0 below.
    String[] withPort = java.util.Arrays.copyOf(args, args.length + 2);
    withPort[args.length] = "-port";
    withPort[args.length + 1] = "8000";
    DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(withPort);
    Field field = DynamoDBProxyServer.class.getDeclaredField("server");
    field.setAccessible(true);
    Server server = (Server) field.get(proxy);
    ServerConnector connector = (ServerConnector) server.getConnectors()[0];
    connector.setHost("127.0.0.1");
    connector.setPort(0);
    Thread watchdog = new Thread(() -> {
      try {
        while (System.in.read() != -1) {}
      } catch (java.io.IOException ignored) {
      }
      System.exit(0);
    });
    watchdog.setDaemon(true);
    watchdog.start();
    proxy.start();
    System.out.println("listening 127.0.0.1:" + connector.getLocalPort());
    System.out.flush();
    proxy.join();
  }
}

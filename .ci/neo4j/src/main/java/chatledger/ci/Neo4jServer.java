package chatledger.ci;

import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.driver.AuthTokens;
import org.neo4j.driver.Driver;
import org.neo4j.driver.GraphDatabase;
import org.neo4j.driver.Session;
import org.neo4j.io.ByteUnit;

/**
 * Neo4j Community for the test suite: one embedded server with Bolt on loopback and
 * authentication off, kept alive until the process is stopped.
 *
 * <p>Usage: {@code Neo4jServer HOME PORT}. Once a query over Bolt answers, prints
 * {@code READY bolt://127.0.0.1:PORT} on stdout; stops the databases cleanly on
 * SIGTERM.
 */
public final class Neo4jServer {
    private static final String HOST = "127.0.0.1";

    private Neo4jServer() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: Neo4jServer HOME PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]);
        int port = Integer.parseInt(args[1]);
        DatabaseManagementService service = start(home, port);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime()
                .addShutdownHook(
                        new Thread(
                                () -> {
                                    System.out.println("STOPPING");
                                    service.shutdown();
                                    stopped.countDown();
                                }));
        String url = "bolt://" + HOST + ":" + port;
        answerOverBolt(url);
        System.out.println("READY " + url);
        System.out.flush();
        stopped.await();
    }

    private static DatabaseManagementService start(Path home, int port) {
        return new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress(HOST, port))
                .setConfig(GraphDatabaseSettings.auth_enabled, false)
                // No usage reports: the machine reaches nothing but loopback.
                .setConfig(GraphDatabaseSettings.udc_enabled, false)
                // A small machine shared with other servers: a small page cache and
                // short transaction logs.
                .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(128))
                .setConfig(GraphDatabaseSettings.keep_logical_logs, "keep_none")
                .setConfig(
                        GraphDatabaseSettings.logical_log_rotation_threshold,
                        ByteUnit.mebiBytes(16))
                .build();
    }

    /** Runs {@code RETURN 1} through the Bolt connector, as a client would. */
    private static void answerOverBolt(String url) {
        try (Driver driver = GraphDatabase.driver(url, AuthTokens.none());
                Session session = driver.session()) {
            int one = session.run("RETURN 1 AS one").single().get("one").asInt();
            if (one != 1) {
                throw new IllegalStateException("RETURN 1 answered " + one);
            }
        }
    }
}

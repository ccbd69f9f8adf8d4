package chatledger.ci;

import com.datastax.driver.core.Cluster;
import com.datastax.driver.core.Row;
import com.datastax.driver.core.Session;
import com.datastax.driver.core.SocketOptions;

/**
 * Asks a Cassandra node a real CQL question and prints its release version.
 *
 * <p>Usage: {@code CqlProbe HOST PORT}. Exits 0 when {@code SELECT release_version
 * FROM system.local} answers over the native protocol, 1 otherwise (the reason goes
 * to stderr). An open port alone is not enough for the tests: the node must accept
 * queries.
 */
public final class CqlProbe {
    private CqlProbe() {}

    public static void main(String[] args) {
        if (args.length != 2) {
            System.err.println("usage: CqlProbe HOST PORT");
            System.exit(2);
        }
        SocketOptions socket = new SocketOptions()
                .setConnectTimeoutMillis(3000)
                .setReadTimeoutMillis(10000);
        try (Cluster cluster = Cluster.builder()
                        .addContactPoint(args[0])
                        .withPort(Integer.parseInt(args[1]))
                        .withSocketOptions(socket)
                        .withoutJMXReporting()
                        .withoutMetrics()
                        .build();
                Session session = cluster.connect()) {
            Row row = session.execute("SELECT release_version FROM system.local").one();
            System.out.println(row.getString("release_version"));
        } catch (RuntimeException error) {
            System.err.println("cql probe: " + error);
            System.exit(1);
        }
    }
}

// The bench's raw Java read: the Kafka client Spark's connector reads with, without Spark.
//
// Run by bench_pipeline.py (phase raw_java) as a single-file program on the connector's classpath:
//   java -cp JARS bench/RawJavaConsume.java BOOTSTRAP TOPIC PARTITIONS COUNT ROUNDS FETCH_BYTES
// Each round opens a consumer, assigns every partition from its start and reads until it has COUNT
// records, as one of the connector's read tasks does per partition; the rounds share one JVM, so
// the first shows a cold client and the later ones a compiled one. One JSON line per round.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class RawJavaConsume {
    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        long count = Long.parseLong(args[3]);
        int rounds = Integer.parseInt(args[4]);
        String fetchBytes = args[5];
        long deadline = System.nanoTime() + 120_000_000_000L;
        for (int round = 0; round < rounds; round++) {
            Properties config = new Properties();
            config.put("bootstrap.servers", bootstrap);
            config.put("key.deserializer", ByteArrayDeserializer.class.getName());
            config.put("value.deserializer", ByteArrayDeserializer.class.getName());
            config.put("enable.auto.commit", "false");
            config.put("max.partition.fetch.bytes", fetchBytes);
            long started = System.nanoTime();
            long records = 0;
            long bytes = 0;
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
                List<TopicPartition> assigned = new ArrayList<>();
                for (int partition = 0; partition < partitions; partition++) {
                    assigned.add(new TopicPartition(topic, partition));
                }
                consumer.assign(assigned);
                consumer.seekToBeginning(assigned);
                while (records < count && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                        records++;
                        bytes += record.value() == null ? 0 : record.value().length;
                    }
                }
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.printf("{\"round\": %d, \"records\": %d, \"bytes\": %d, \"seconds\": %.4f}%n",
                              round, records, bytes, seconds);
        }
    }
}

"""What happens to a notification between the Kafka consumer and the endpoint."""

"""What happens to a notification between the Kafka consumer and the endpoint.

Commit policies (:mod:`.commit`: when offsets are committed), the at-least-once
tracker (:mod:`.atleastonce`, :mod:`.tracker`), retry topics and their delay
(:mod:`.retry`), dead-letter copies (:mod:`.deadletter`), ordered worker
threads (:mod:`.workers`), lifecycle hooks (:mod:`.hooks`), the counters
(:mod:`.counters`) and the validated per-listener settings (:mod:`.settings`).
"""

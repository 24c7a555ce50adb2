"""A second distribution registering a listener named billing, as ntlisteners-demo does."""


class Billing:
    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        pass

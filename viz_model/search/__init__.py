"""Search: its settings, the hypothesis types, next-token scores, one module per decoding rule (this project's and
transformers'), the dispatcher above them, batched translation of many sentences and teacher-forced passes over
them."""

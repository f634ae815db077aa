"""Text data: parallel text files, padded batches of ids, one corpus split across processes, and BLEU / chrF."""

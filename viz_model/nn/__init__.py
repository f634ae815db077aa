"""The network: the encoder-decoder Transformer, its attention, positional encodings and linear layers, and the
int8 copy used at inference. Nothing here knows about tokenizers, files or search."""

"""The network: the encoder-decoder Transformer, its attention, positional encodings and linear layers, and the
int8 copy used at inference, a view with heads switched off. Nothing here knows about tokenizers, files or search."""

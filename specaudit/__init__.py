"""specaudit: audit speculative-decoding (EAGLE-3) integrations in vLLM and SGLang before launch."""

__version__ = "0.1.0"

"""The OpenAI-compatible endpoint families: chat (and text completions), responses, embeddings, rerank."""

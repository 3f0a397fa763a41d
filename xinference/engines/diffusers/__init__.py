"""The diffusers engine: image generation (text to image, image to image, inpainting)."""

"""The `.dlm` document model: frontmatter schema, body sections, expanded sources."""

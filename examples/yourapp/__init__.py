"""The helpers of docs/integration/frameworks.md's snippets (``yourapp.forms``)."""

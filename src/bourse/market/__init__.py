"""The market: offers from cloud catalogues and nodes, and the index that matches them fast."""

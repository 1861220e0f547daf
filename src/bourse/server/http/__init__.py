"""HTTP details: request and frame sizes (``limits``), the UI session cookie's name (``cookie``)."""

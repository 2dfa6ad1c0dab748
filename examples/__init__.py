"""Programs the harness studies as your own function would be (README: "Studying your own function")."""

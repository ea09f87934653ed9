"""An example errkb plugin: ACME widgets jam, and errkb says which spare to use."""

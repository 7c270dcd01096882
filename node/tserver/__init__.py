"""The tablet server process: hosts tablet replicas, serves rows, heartbeats to every master."""

"""Domain logic, shared by the GraphQL schema and the REST routes."""

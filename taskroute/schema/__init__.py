"""The GraphQL schema: thin resolvers that parse, authorise and call `taskroute.resolvers`."""

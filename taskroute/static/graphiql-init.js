// GraphiQL on this server's /graphql (HTTP and graphql-transport-ws), from vendored assets.
// The bearer token goes in the Headers tab: {"Authorization": "Bearer ..."}.
"use strict";
(function () {
  const url = window.location.origin + "/graphql";
  const params = new URLSearchParams(window.location.search);
  const fetcher = GraphiQL.createFetcher({
    url: url,
    subscriptionUrl: url.replace(/^http/, "ws"),
  });
  const root = ReactDOM.createRoot(document.getElementById("graphiql"));
  root.render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: params.get("query") || "{ __typename }\n",
      defaultHeaders: '{\n  "Authorization": "Bearer <your token>"\n}\n',
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: true,
      inputValueDeprecation: true,
    }),
  );
})();

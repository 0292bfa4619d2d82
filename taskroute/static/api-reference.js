// Swagger UI on this server's /openapi.json, from vendored assets. validatorUrl: null, or the
// page would load a badge from validator.swagger.io.
"use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#reference",
  validatorUrl: null,
  deepLinking: true,
  tryItOutEnabled: false,
  persistAuthorization: false,
});

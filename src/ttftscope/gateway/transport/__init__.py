"""How bytes come in and go out: plain ASGI (``asgi``), the inbound bounds (``bounds``) and
deadline (``deadline``), the upstream HTTP/1.1 client (``hop``), trace stamps (``hoptrace``),
errors in each API's format (``apierrors``), the JSON read and written exactly
(``jsoncodec``), ids as JSON blocks spliced into bodies (``idsbody``) and the request log
(``requestlog``). The bottom layer of the gateway: it imports none of the others."""

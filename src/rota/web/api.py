"""A small declarative layer over Starlette: each endpoint states its method, path,
permission and pydantic models once; requests are validated from them and the OpenAPI 3
document is generated from the same declarations, so the two cannot drift apart."""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rota.auth import Permission, Principal, Role
from rota.web.problems import PROBLEM_JSON, Problem, from_exception
from rota.web.settings import MAX_JSON_DEPTH

if typing.TYPE_CHECKING:
    from rota.standard import App

REF = "#/components/schemas/{model}"
ANONYMOUS = Principal(name="anonymous", role=Role.VIEWER, via="token")


@dataclass
class Call:
    """What a handler gets: the app, who calls, and the validated inputs."""

    app: App
    principal: Principal
    request: Request
    path: Any = None
    query: Any = None
    body: Any = None


Handler = Callable[[Call], Any]
# Resolves the caller of a request (raises AuthenticationError when there is none).
Authenticator = Callable[[Request], Principal]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    permission: Permission | None  # None: public
    summary: str
    tag: str
    operation_id: str
    path_model: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    many: bool = False  # the response is a JSON array of `response`
    status: int = 200
    errors: tuple[int, ...] = ()


@dataclass
class Api:
    """The registry of endpoints; feature modules add theirs with `api.route(...)`."""

    title: str = "rota"
    version: str = "0"
    endpoints: list[Endpoint] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)

    def route(
        self,
        method: str,
        path: str,
        *,
        permission: Permission | None,
        summary: str,
        tag: str,
        path_model: type[BaseModel] | None = None,
        query: type[BaseModel] | None = None,
        body: type[BaseModel] | None = None,
        response: type[BaseModel] | None = None,
        many: bool = False,
        status: int = 200,
        errors: tuple[int, ...] = (),
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.endpoints.append(
                Endpoint(
                    method=method.upper(),
                    path=path,
                    handler=handler,
                    permission=permission,
                    summary=summary,
                    tag=tag,
                    operation_id=handler.__name__,
                    path_model=path_model,
                    query=query,
                    body=body,
                    response=response,
                    many=many,
                    status=status,
                    errors=errors,
                )
            )
            return handler

        return register

    def routes(self, app: App, authenticate: Authenticator) -> list[Route]:
        by_path: dict[str, list[Endpoint]] = {}
        for ep in self.endpoints:
            by_path.setdefault(ep.path, []).append(ep)
        return [
            Route(path, _dispatch(app, eps, authenticate), methods=[e.method for e in eps])
            for path, eps in by_path.items()
        ]

    def openapi(self) -> dict[str, Any]:
        return build_openapi(self)


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(annotation))
    return False


def _query_values(model: type[BaseModel], request: Request) -> dict[str, Any]:
    values: dict[str, Any] = {}
    params = request.query_params
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in params:
            continue
        values[name] = params.getlist(key) if _is_list(info.annotation) else params[key]
    return values


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")


def json_depth_exceeds(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `raw` nests arrays and objects deeper than `limit`, checked before parsing
    (the parser would recurse once per level, and 100,000 `[` raise RecursionError)."""
    # Brackets inside strings do not nest: drop the strings, then every other byte but
    # the brackets, and count.
    depth = 0
    for byte in _STRINGS.sub(b"", raw).translate(None, _BRACKETS):
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


async def _body(request: Request) -> Any:
    raw = await request.body()
    if not raw:
        return {}
    if json_depth_exceeds(raw):
        raise Problem(
            400, f"the request body nests deeper than {MAX_JSON_DEPTH} levels", kind="bad-json"
        )
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Problem(400, "the request body is not valid JSON", kind="bad-json") from None


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value


def _dispatch(app: App, endpoints: list[Endpoint], authenticate: Authenticator) -> Any:
    table = {e.method: e for e in endpoints}

    async def endpoint(request: Request) -> Response:
        ep = table[request.method if request.method != "HEAD" else "GET"]
        try:
            if ep.permission is None:
                # Public endpoints check what they need themselves (health needs nothing).
                principal = ANONYMOUS
            else:
                principal = await run_in_threadpool(authenticate, request)
                principal.require(ep.permission)
            call = Call(app=app, principal=principal, request=request)
            try:
                if ep.path_model is not None:
                    call.path = ep.path_model.model_validate(request.path_params)
                if ep.query is not None:
                    call.query = ep.query.model_validate(_query_values(ep.query, request))
                if ep.body is not None:
                    call.body = ep.body.model_validate(await _body(request))
            except ValidationError as exc:
                return from_exception(exc, request)
            result = await run_in_threadpool(ep.handler, call)
        except Exception as exc:  # every error answers as a problem document
            return from_exception(exc, request)
        if isinstance(result, Response):
            return result
        if result is None and ep.status == 204:
            return Response(status_code=204)
        return _JSONResponse(_dump(result), status_code=ep.status)

    return endpoint


class _JSONResponse(JSONResponse):
    """JSON that survives stored text UTF-8 cannot carry (a lone surrogate that SQLite
    kept from an older version): it is sent as a \\udxxx escape instead of a 500 (#17)."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            text = json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
            return text.encode("ascii")


# --- OpenAPI -------------------------------------------------------------------------------


def _problem_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "RFC 9457 problem details.",
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "instance": {"type": "string"},
            "errors": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["type", "title", "status", "detail"],
    }


def _parameters(model: type[BaseModel], where: str, schema: dict[str, Any]) -> list[Any]:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    params = []
    for name, prop in props.items():
        param: dict[str, Any] = {
            "name": name,
            "in": where,
            "required": where == "path" or name in required,
            "schema": {k: v for k, v in prop.items() if k not in ("title", "description")},
        }
        if "description" in prop:
            param["description"] = prop["description"]
        if where == "query" and prop.get("type") == "array":
            param["style"] = "form"
            param["explode"] = True
        params.append(param)
    return params


def build_openapi(api: Api) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every declared endpoint."""
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = []
    for ep in api.endpoints:
        wanted: list[tuple[type[BaseModel] | None, JsonSchemaMode]] = [
            (ep.body, "validation"),
            (ep.response, "serialization"),
            (ep.query, "validation"),
            (ep.path_model, "validation"),
        ]
        for model, mode in wanted:
            if model is not None and (model, mode) not in models:
                models.append((model, mode))
    keyed, defs = models_json_schema(models, ref_template=REF)
    components: dict[str, Any] = dict(defs.get("$defs", {}))
    components["Problem"] = _problem_schema()

    def inline(model: type[BaseModel], mode: JsonSchemaMode) -> dict[str, Any]:
        ref = keyed[(model, mode)]["$ref"].rsplit("/", 1)[-1]
        return typing.cast(dict[str, Any], components[ref])

    paths: dict[str, Any] = {}
    for ep in api.endpoints:
        op: dict[str, Any] = {
            "operationId": ep.operation_id,
            "summary": ep.summary,
            "tags": [ep.tag],
        }
        doc = (ep.handler.__doc__ or "").strip()
        if doc:
            op["description"] = doc
        params: list[Any] = []
        if ep.path_model is not None:
            params += _parameters(ep.path_model, "path", inline(ep.path_model, "validation"))
        if ep.query is not None:
            params += _parameters(ep.query, "query", inline(ep.query, "validation"))
        if params:
            op["parameters"] = params
        if ep.body is not None:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": keyed[(ep.body, "validation")]}},
            }
        responses: dict[str, Any] = {}
        if ep.status == 204:
            responses["204"] = {"description": "Done."}
        else:
            schema: dict[str, Any] = {}
            if ep.response is not None:
                schema = keyed[(ep.response, "serialization")]
                if ep.many:
                    schema = {"type": "array", "items": schema}
            responses[str(ep.status)] = {
                "description": "OK.",
                "content": {"application/json": {"schema": schema}},
            }
        problem = {PROBLEM_JSON: {"schema": {"$ref": REF.format(model="Problem")}}}
        codes = set(ep.errors)
        if ep.permission is not None:
            codes |= {401, 403}
            op["security"] = [{"bearer": []}]
            op["x-permission"] = str(ep.permission)
        if params or ep.body is not None:
            codes.add(422)
        if ep.body is not None:
            codes |= {400, 413, 415}
        for code in sorted(codes):
            responses[str(code)] = {"description": _describe(code), "content": problem}
        op["responses"] = responses
        paths.setdefault(ep.path, {})[ep.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": api.title,
            "version": api.version,
            "description": "The HTTP JSON API of rota: the dashboard uses it too. "
            "Send `Authorization: Bearer <token>`; tokens carry a role "
            "(viewer, operator, replayer, admin). Errors are RFC 9457 problem details.",
        },
        "tags": [{"name": k, "description": v} for k, v in api.tags.items()],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _describe(code: int) -> str:
    return {
        400: "The body is not JSON, or nests too deep.",
        401: "No valid token.",
        403: "The token's role lacks the permission.",
        404: "Not found.",
        409: "The job is in a state that does not allow this.",
        413: "The body is over the size limit.",
        415: "The body is not sent as application/json.",
        422: "Invalid input.",
        503: "The database is unavailable.",
    }.get(code, "Error.")

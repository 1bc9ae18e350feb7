"""Every SDK name fusion-nb imports is pinned here, and each pin is checked against the installed SDK.

``SDK_NAMES`` is the list, one ``module:name`` (or a bare module) a line: a scan of
``fusion_nb/**/*.py`` fails on an import missing from it, or a name read through an
imported SDK module (``types.Tool``), so a new dependency on the SDK must be added here
on purpose and on a pin nothing imports any more (the list stays
exact). Each pin must resolve in the installed SDK. A pinned name the SDK does not
publish (no ``__all__`` of its module or packages lists it, where one exists) must name
the test of the behaviour fusion-nb relies on in ``UNPUBLISHED``: an SDK upgrade is a test
run, not a hunt (``fusion_nb/mcp/_sdk.py`` holds the touch points on SDK privates).
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

from fusion_nb.mcp._sdk import SDK_SERIES

PACKAGE = Path(__file__).resolve().parents[2] / "fusion_nb"
SDK_PACKAGES = ("mcp", "mcp_types")

SDK_NAMES = frozenset(
    {
        "mcp.client.extension:ClaimContext",
        "mcp.client.extension:ClientExtension",
        "mcp.client.extension:NotificationBinding",
        "mcp.client.extension:ResultClaim",
        "mcp.client.streamable_http:streamable_http_client",
        "mcp.client.subscriptions:ListenNotSupportedError",
        "mcp.server.apps:APP_MIME_TYPE",
        "mcp.server.apps:EXTENSION_ID",
        "mcp.server.apps:client_supports_apps",
        "mcp.server.auth.middleware.auth_context:auth_context_var",
        "mcp.server.auth.middleware.auth_context:get_access_token",
        "mcp.server.auth.middleware.bearer_auth:AuthenticatedUser",
        "mcp.server.auth.middleware.bearer_auth:authorization_context",
        "mcp.server.auth.provider:AccessToken",
        "mcp.server.auth.provider:principal_components",
        "mcp.server.auth.routes:build_resource_metadata_url",
        "mcp.server.auth.routes:create_protected_resource_routes",
        "mcp.server.connection:Connection",
        "mcp.server.context:CallNext",
        "mcp.server.context:HandlerResult",
        "mcp.server.context:ServerRequestContext",
        "mcp.server.lowlevel.server:NotificationOptions",
        "mcp.server.lowlevel.server:Server",
        "mcp.server.models:InitializationOptions",
        "mcp.server.request_state:RequestStateBoundary",
        "mcp.server.request_state:RequestStateSecurity",
        "mcp.server.runner:ServerRunner",
        "mcp.server.runner:aclose_shielded",
        "mcp.server.runner:modern_error_data",
        "mcp.server.session:ServerSession",
        "mcp.server.streamable_http:check_accept_headers",
        "mcp.server.streamable_http_manager:StreamableHTTPASGIApp",
        "mcp.server.streamable_http_manager:StreamableHTTPSessionManager",
        "mcp.server.subscriptions:InMemorySubscriptionBus",
        "mcp.server.subscriptions:ListenHandler",
        "mcp.server.subscriptions:PromptsListChanged",
        "mcp.server.subscriptions:ResourceUpdated",
        "mcp.server.subscriptions:ResourcesListChanged",
        "mcp.server.subscriptions:SUBSCRIPTION_ID_META_KEY",
        "mcp.server.subscriptions:ServerEvent",
        "mcp.server.subscriptions:ToolsListChanged",
        "mcp.server.transport_security:RequestBodyLimitMiddleware",
        "mcp.server.transport_security:TransportSecurityMiddleware",
        "mcp.server.transport_security:TransportSecuritySettings",
        "mcp.shared.direct_dispatcher:DIRECT_TRANSPORT_KIND",
        "mcp.shared.dispatcher:CallOptions",
        "mcp.shared.exceptions:MCPDeprecationWarning",
        "mcp.shared.exceptions:MCPError",
        "mcp.shared.exceptions:NoBackChannelError",
        "mcp.shared.inbound:ERROR_CODE_HTTP_STATUS",
        "mcp.shared.inbound:InboundLadderRejection",
        "mcp.shared.inbound:InboundModernRoute",
        "mcp.shared.inbound:MCP_NAME_HEADER",
        "mcp.shared.inbound:classify_inbound_request",
        "mcp.shared.inbound:decode_header_value",
        "mcp.shared.inbound:find_duplicated_routing_header",
        "mcp.shared.inbound:unsupported_protocol_version_rejection",
        "mcp.shared.inbound:validate_mcp_param_headers",
        "mcp.shared.inbound:x_mcp_header_map",
        "mcp.shared.jsonrpc_dispatcher:cancelled_request_id_from_params",
        "mcp.shared.jsonrpc_dispatcher:handler_exception_to_error_data",
        "mcp.shared.jsonrpc_dispatcher:progress_token_from_params",
        "mcp.shared.message:ServerMessageMetadata",
        "mcp.shared.transport_context:TransportContext",
        "mcp.types:CallToolRequestParams",
        "mcp.types:CallToolResult",
        "mcp.types:CancelTaskRequest",
        "mcp.types:CancelTaskRequestParams",
        "mcp.types:ClientCapabilities",
        "mcp.types:CreateMessageRequest",
        "mcp.types:CreateMessageRequestParams",
        "mcp.types:CreateMessageResult",
        "mcp.types:CreateMessageResultWithTools",
        "mcp.types:ElicitRequest",
        "mcp.types:ElicitRequestFormParams",
        "mcp.types:ElicitRequestURLParams",
        "mcp.types:ElicitResult",
        "mcp.types:GetTaskRequest",
        "mcp.types:GetTaskRequestParams",
        "mcp.types:InputRequiredResult",
        "mcp.types:ListRootsRequest",
        "mcp.types:ListRootsResult",
        "mcp.types:Request",
        "mcp.types:RequestParams",
        "mcp.types:Result",
        "mcp.types:SubscriptionFilter",
        "mcp.types:SubscriptionsListenRequest",
        "mcp.types:SubscriptionsListenRequestParams",
        "mcp.types:TextContent",
        "mcp:Client",
        "mcp:types",
        "mcp_types",
        "mcp_types.methods:is_input_required",
        "mcp_types.methods:serialize_server_result",
        "mcp_types.version:HANDSHAKE_PROTOCOL_VERSIONS",
        "mcp_types.version:LATEST_MODERN_VERSION",
        "mcp_types.version:MODERN_PROTOCOL_VERSIONS",
        "mcp_types:AudioContent",
        "mcp_types:CLIENT_CAPABILITIES_META_KEY",
        "mcp_types:CLIENT_INFO_META_KEY",
        "mcp_types:CONNECTION_CLOSED",
        "mcp_types:CallToolRequestParams",
        "mcp_types:CallToolResult",
        "mcp_types:CompleteRequestParams",
        "mcp_types:CompleteResult",
        "mcp_types:Completion",
        "mcp_types:CreateMessageRequestParams",
        "mcp_types:ElicitRequest",
        "mcp_types:ElicitRequestFormParams",
        "mcp_types:ElicitRequestParams",
        "mcp_types:ElicitRequestURLParams",
        "mcp_types:ElicitResult",
        "mcp_types:EmbeddedResource",
        "mcp_types:EmptyResult",
        "mcp_types:ErrorData",
        "mcp_types:GetPromptRequestParams",
        "mcp_types:GetPromptResult",
        "mcp_types:HEADER_MISMATCH",
        "mcp_types:INTERNAL_ERROR",
        "mcp_types:INVALID_PARAMS",
        "mcp_types:INVALID_REQUEST",
        "mcp_types:ImageContent",
        "mcp_types:Implementation",
        "mcp_types:InputRequiredResult",
        "mcp_types:JSONRPCError",
        "mcp_types:JSONRPCNotification",
        "mcp_types:JSONRPCRequest",
        "mcp_types:JSONRPCResponse",
        "mcp_types:LOG_LEVEL_META_KEY",
        "mcp_types:ListPromptsResult",
        "mcp_types:ListResourceTemplatesResult",
        "mcp_types:ListResourcesResult",
        "mcp_types:ListToolsResult",
        "mcp_types:LoggingMessageNotification",
        "mcp_types:LoggingMessageNotificationParams",
        "mcp_types:METHOD_NOT_FOUND",
        "mcp_types:MISSING_REQUIRED_CLIENT_CAPABILITY",
        "mcp_types:Notification",
        "mcp_types:NotificationParams",
        "mcp_types:PARSE_ERROR",
        "mcp_types:PROTOCOL_VERSION_META_KEY",
        "mcp_types:PaginatedRequestParams",
        "mcp_types:PaginatedResult",
        "mcp_types:Prompt",
        "mcp_types:PromptArgument",
        "mcp_types:PromptListChangedNotification",
        "mcp_types:PromptReference",
        "mcp_types:REQUEST_TIMEOUT",
        "mcp_types:ReadResourceRequestParams",
        "mcp_types:ReadResourceResult",
        "mcp_types:Request",
        "mcp_types:RequestId",
        "mcp_types:RequestParams",
        "mcp_types:Resource",
        "mcp_types:ResourceLink",
        "mcp_types:ResourceListChangedNotification",
        "mcp_types:ResourceTemplate",
        "mcp_types:ResourceUpdatedNotification",
        "mcp_types:Result",
        "mcp_types:ServerCapabilities",
        "mcp_types:SetLevelRequestParams",
        "mcp_types:SubscribeRequestParams",
        "mcp_types:SubscriptionFilter",
        "mcp_types:SubscriptionsAcknowledgedNotification",
        "mcp_types:SubscriptionsListenRequestParams",
        "mcp_types:SubscriptionsListenResult",
        "mcp_types:TaskStatusNotification",
        "mcp_types:TaskStatusNotificationParams",
        "mcp_types:TextContent",
        "mcp_types:Tool",
        "mcp_types:ToolAnnotations",
        "mcp_types:ToolExecution",
        "mcp_types:ToolListChangedNotification",
        "mcp_types:UNSUPPORTED_PROTOCOL_VERSION",
        "mcp_types:UnsubscribeRequestParams",
        "mcp_types:jsonrpc_message_adapter",
        "mcp_types:methods",
    }
)

#: the pinned names the SDK does not publish, each with the test (in tests/mcp) of what fusion-nb relies on
UNPUBLISHED = {
    "mcp.server.runner:modern_error_data": (
        "test_the_kernels_error_mapping_keeps_protocol_codes_and_hides_the_rest"  # (test_sdk_contract.py, via _sdk.py)
    ),
    "mcp.shared.direct_dispatcher:DIRECT_TRANSPORT_KIND": (
        "test_the_direct_path_reveals_whether_a_progress_callback_was_given"  # (test_sdk_contract.py, via _sdk.py)
    ),
}


def imported_sdk_names(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Each SDK ``module:name`` (or bare module) imported under ``package``, with where.

    A name reached through an imported SDK module (``types.Tool`` after
    ``import mcp_types as types``) counts as imported from it: it breaks as an import
    does when the SDK drops it, only later, on the line that reads it.
    """
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        modules: dict[str, str] = {}  # a local name bound to an SDK module -> that module
        for node in ast.walk(tree):
            pins: list[str] = []
            if not isinstance(node, (ast.ImportFrom, ast.Import)):
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] in SDK_PACKAGES:
                    pins = [f"{node.module}:{alias.name}" for alias in node.names]
                    for alias in node.names:
                        if _is_module(f"{node.module}.{alias.name}"):
                            modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                pins = [alias.name for alias in node.names if alias.name.split(".")[0] in SDK_PACKAGES]
                for alias in node.names:
                    if alias.name in pins and (alias.asname or "." not in alias.name):
                        modules[alias.asname or alias.name] = alias.name
            for pin in pins:
                found.setdefault(pin, []).append(f"{path.relative_to(package.parent)}:{node.lineno}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                pin = f"{modules[node.value.id]}:{node.attr}"
                found.setdefault(pin, []).append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return found


def _is_module(name: str) -> bool:
    """Whether ``name`` is an importable module (``from mcp import types`` imports one)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def resolve(pin: str) -> object:
    """The object a pin names in the installed SDK (``AttributeError`` / ``ImportError`` when gone)."""
    module_name, _, name = pin.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, name) if name else module


def published(pin: str) -> bool:
    """Whether the SDK publishes the pinned name.

    Listed in the ``__all__`` of its module or of a package above it (as the same
    object), a module itself, or defined in a module without ``__all__`` (PEP 8's
    convention: there every name not starting with ``_`` is public).
    """
    module_name, _, name = pin.partition(":")
    value = resolve(pin)
    if not name or isinstance(value, types.ModuleType):
        return not any(part.startswith("_") for part in module_name.split("."))
    parts = module_name.split(".")
    for depth in range(len(parts), 0, -1):
        package = importlib.import_module(".".join(parts[:depth]))
        if name in getattr(package, "__all__", ()) and getattr(package, name, None) is value:
            return True
    module = importlib.import_module(module_name)
    defines = isinstance(value, type | types.FunctionType)  # (an alias or a constant does not say where it was made)
    home = value.__module__ if defines else module_name
    return not name.startswith("_") and getattr(module, "__all__", None) is None and home == module_name


def test_every_sdk_import_is_pinned_and_every_pin_is_imported():
    found = imported_sdk_names()
    unpinned = {pin: where for pin, where in found.items() if pin not in SDK_NAMES}
    assert unpinned == {}, f"new SDK imports: pin them in SDK_NAMES (and test what they do if unpublished): {unpinned}"
    assert sorted(SDK_NAMES - set(found)) == [], "pins nothing imports any more: remove them from SDK_NAMES"


@pytest.mark.parametrize("pin", sorted(SDK_NAMES))
def test_every_pinned_name_exists_in_this_sdk(pin):
    try:
        resolve(pin)
    except (ImportError, AttributeError) as gone:
        pytest.fail(f"{SDK_SERIES} contract broken: {pin} is gone from the installed SDK ({gone}).", pytrace=False)


def test_every_unpublished_pin_names_the_test_of_its_behaviour():
    unpublished = sorted(pin for pin in SDK_NAMES if not published(pin))
    assert unpublished == sorted(UNPUBLISHED), "unpublished SDK names without a behaviour test in UNPUBLISHED"
    defined = {
        node.name
        for path in Path(__file__).parent.glob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert sorted(set(UNPUBLISHED.values()) - defined) == []


def test_the_scan_sees_each_kind_of_import(tmp_path):
    """The scan itself, on a package written here: a scan that finds nothing cannot make the pin test pass."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        "import mcp_types\nimport mcp_types as t\nfrom mcp import Client\nfrom . import mcp\n"
        "def f():\n    from mcp.server.runner import ServerRunner, aclose_shielded\n"
        "from mcp import types as sdk_types\nx = (t.Tool, mcp_types.ErrorData, sdk_types.Result, mcp.Client)\n"
    )
    assert sorted(imported_sdk_names(tmp_path / "pkg")) == sorted(
        [
            "mcp:Client",
            "mcp:types",
            "mcp.server.runner:ServerRunner",
            "mcp.server.runner:aclose_shielded",
            "mcp.types:Result",
            "mcp_types",
            "mcp_types:ErrorData",
            "mcp_types:Tool",
        ]
    )
    assert published("mcp:Client") and published("mcp.server.runner:ServerRunner")
    assert not published("mcp.server.runner:modern_error_data")

"""What runs around every mutation (schema/pipeline.py calls these around execution):
`mark_writing` marks a mutation so a read-only token is refused it (`Context.viewer`), and
`audit_admin_mutations` writes an audit line for each successful admin mutation whose domain
function does not write its own (pauses, retractions, reversals...).
"""

from __future__ import annotations

from graphql import OperationType, value_from_ast_untyped
from graphql.language import FieldNode, OperationDefinitionNode
from strawberry.types import ExecutionContext

from taskroute.resolvers.accounts import rules as accounts
from taskroute.resolvers.accounts.credentials import parse_id

from .context import Context

# Root mutation fields whose domain functions write their own audit line (in-transaction).
SELF_AUDITED = frozenset(
    {
        "createCustomer",
        "createExpert",
        "grantSkill",
        "removeSkill",
        "setStartingQuality",
        "setCapabilities",
        "deactivateExpert",
        "reactivateExpert",
        "createCredential",
        "revokeCredential",
        "rotateCredential",
    }
)


# --- around execution (schema/pipeline.py) ----------------------------------------------


def _operation(ctx: ExecutionContext) -> OperationDefinitionNode | None:
    doc = ctx.graphql_document
    if doc is None:
        return None
    ops = [d for d in doc.definitions if isinstance(d, OperationDefinitionNode)]
    if ctx.operation_name:
        ops = [o for o in ops if o.name is not None and o.name.value == ctx.operation_name]
    return ops[0] if len(ops) == 1 else None


def mark_writing(ctx: ExecutionContext) -> None:
    """Before execution: marks the context of a mutation, so `Context.viewer` refuses a
    read-only token."""
    op = _operation(ctx)
    mutation = op is not None and op.operation == OperationType.MUTATION
    if mutation and isinstance(ctx.context, Context):
        ctx.context.writing = True


async def audit_admin_mutations(ctx: ExecutionContext) -> None:
    """After execution: an audit line for every admin mutation field that succeeded and does
    not audit itself (pauseExpert, unpauseExpert, retractAnswers, reverse, ...): who, when,
    which arguments (`reason` among them: the why). Written outside the operation's
    transaction."""
    context = ctx.context
    op = _operation(ctx)
    if op is None or op.operation != OperationType.MUTATION or not isinstance(context, Context):
        return
    viewer = context._viewer
    if viewer is None or viewer.role != "admin" or ctx.result is None:
        return
    failed = {str(e.path[0]) for e in (ctx.result.errors or []) if e.path}
    mutation = ctx.schema._schema.mutation_type
    if mutation is None:
        return
    for node in op.selection_set.selections:
        if not isinstance(node, FieldNode):
            continue
        name = node.name.value
        key = node.alias.value if node.alias else name
        if name in SELF_AUDITED or key in failed or name not in mutation.fields:
            continue
        variables = ctx.variables or {}
        args = {
            a.name.value: value_from_ast_untyped(a.value, variables)
            for a in node.arguments or ()  # None for a field written without arguments
        }
        subject = next(
            (args[k] for k in ("expertId", "payoutId", "projectId", "id") if k in args),
            None,
        )
        try:
            subject_id = parse_id(subject) if subject is not None else None
        except Exception:
            subject_id = None
        reason = args.get("reason")
        await accounts.record(
            context.db,
            viewer.actor,
            name,
            "expert" if "expertId" in args else "other",
            subject_id,
            reason if isinstance(reason, str) else None,
            arguments=args,
        )

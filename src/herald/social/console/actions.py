"""Social's manual action in the console: disconnect a linked account.

The review says what disconnecting does (the credentials are revoked at the platform and
wiped, the account's waiting posts fail); the perform calls
:func:`herald.social.admission.request_disconnect`, which changes the account, fails its
posts, admits the revoke job and writes the audit record in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from herald.console import Action, Caller, Done
from herald.console.registry import Skip, per_target
from herald.console.web import identifier
from herald.errors import UnknownKind
from herald.ops.errors import NotFound
from herald.social.accounts import StoredAccount, get_account
from herald.social.admission import REVOKE, request_disconnect


def runs_social(caller: Caller) -> bool:
    try:
        caller.state.app.kind(REVOKE)
    except UnknownKind:
        return False
    return True


async def _account(caller: Caller, target: str) -> StoredAccount | None:
    async with caller.state.client.pool.connection() as conn:
        try:
            return await get_account(conn, identifier(target, "account id"))
        except NotFound:
            return None


def _disconnect_verdict(caller: Caller, row: StoredAccount) -> str | Skip:
    if row.status == "revoked":
        return Skip(f"account {row.id} is disconnected already")
    if not runs_social(caller):
        return Skip(f"account {row.id}: this deployment does not run social's jobs")
    return (
        f"Disconnect {row.provider} account {row.id} ({row.name}, of "
        f"{row.owner}): it becomes revoking at once, every post of it still queued or "
        "publishing fails with your reason, and a job revokes its credentials at the "
        "platform and wipes them here. Its published posts stay as they are."
    )


async def _disconnect(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> Done:
    account_id = identifier(target, "account id")
    if not runs_social(caller):
        raise ValueError("this deployment does not run social's jobs")
    admitted = await request_disconnect(
        caller.state.client, account_id, actor=caller.name, reason=reason
    )
    failed = len(admitted.failed_posts)
    return Done(
        f"account {account_id}: disconnecting (job {admitted.job_id}); {failed} waiting "
        f"post{'s' if failed != 1 else ''} failed",
        f"/social/accounts/{account_id}",
    )


def _back(targets: Sequence[str]) -> str:
    return f"/social/accounts/{targets[0]}" if len(targets) == 1 else "/social"


ACTIONS = (
    Action(
        "social_account.disconnect",
        "Disconnect",
        "operate",
        per_target("Disconnect {}", "account", _account, _disconnect_verdict),
        _disconnect,
        back=_back,
    ),
)

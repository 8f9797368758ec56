"""The bolt App and its listeners: slash commands, @-mentions in threads, the plan/job buttons, and the message
shortcut "Diagnose with specops" (a modal for the context, then the diagnosis in the message's thread).

A mention `diagnose [--method …]` with a log (a code block, lines after the first, attached files) and the
shortcut diagnose that text: the files are read (files.info, the download) in the job, never before the ack.

Listeners parse, authorize, queue the audit record, acknowledge, and hand the work to the job
pool; they never wait on a host, and a slash command's ack waits neither on SQLite (the store's
writer commits the row; the job waits for that before it starts) nor on Slack (user groups are
kept fresh in the background). Every job posts one progress message, edits it in place
(throttled), and posts the report — with the chart — in its thread.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from slack_bolt import App, BoltResponse
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.adapters.slack import blocks as ui
from bot.adapters.slack import shortcut
from bot.adapters.slack.auth import Authorizer
from bot.adapters.slack.files import FileRefused, SlackFiles
from bot.adapters.slack.jobs import Busy, Job, JobError, JobPool, LostJob, Plan, Plans
from bot.adapters.slack.notify import SlackNotifier
from bot.adapters.slack.settings import SlackSecrets
from bot.adapters.slack.sink import SlackSink, blocks_of
from bot.app.chat import AuditRow, ChatDispatcher, Progress, Who, refused_before_launch
from bot.app.commands import Command, parse
from bot.app.diagnosis.paste import PastedFile
from bot.app.operations import ops
from bot.app.services import Services, build_services
from bot.app.watching.incidents import IncidentManager
from bot.config import Config
from bot.core.durations import spoken
from bot.core.report import Report
from bot.errors import SpecopsError, StoreUnavailable
from bot.present.render import files_of, render, trend_file
from bot.present.summary import summary_of
from bot.redact import redactor_for

log = logging.getLogger("specops.slack")
MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")


def make_client(secrets: SlackSecrets) -> WebClient:
    kwargs: dict[str, Any] = {"token": secrets.slack_bot_token}
    if secrets.specops_slack_api_url:
        kwargs["base_url"] = secrets.specops_slack_api_url.rstrip("/") + "/"
    client = WebClient(**kwargs)
    # 429s carry Retry-After: honour it (slack_sdk only retries connection errors by default)
    client.retry_handlers = [ConnectionErrorRetryHandler(), RateLimitErrorRetryHandler(max_retry_count=3)]
    return client


# what each of our buttons carries: plan and job ids (12 hex digits), incident ids (numbers)
ACTION_VALUES: dict[str, re.Pattern[str]] = {
    **{a: re.compile(r"[0-9a-f]{12}") for a in ("plan_confirm", "plan_cancel", "job_cancel")},
    **{a: re.compile(r"\d{1,12}") for a in ("incident_ack", "incident_rediagnose", "incident_rollback",
                                             "incident_resolve")},
}


class StoreDown(Exception):
    """The shared store cannot record a delivery: the chat answer says so, and nothing runs."""


class SpecopsBot:
    def __init__(self, config: Config, secrets: SlackSecrets, client: WebClient | None = None,
                 services: Services | None = None) -> None:
        self.config = config
        self.settings = config.slack
        self._owns_services = services is None
        tokens = (secrets.slack_bot_token, secrets.slack_signing_secret, secrets.slack_app_token)
        self.services = services or build_services(config, redactor=redactor_for(config, tokens))
        self.redactor = self.services.redactor
        for secret in tokens:  # a graph built by the caller learns them too: it is the one the store writes through
            self.redactor.add_secret(secret)
        self.client = client or make_client(secrets)
        self.sink = SlackSink(self.client, self.redactor)
        # attached logs: size-capped, text only
        self.files = SlackFiles(self.client, secrets.slack_bot_token, redactor=self.redactor)
        self.waiting = shortcut.Waiting()  # messages whose "Diagnose with specops" modal is open
        # the configured user groups are kept fresh in the background: an ack does not wait on usergroups.users.list
        self.auth = Authorizer(self.settings, self.sink, [config.watch.oncall_usergroup]).start()
        self.chat = ChatDispatcher(self.services)
        # replicas on one store: a plan's confirm press, or a job's Cancel, may reach another replica, so plans and
        # running jobs live in the store
        store = self.services.store if self.services.shared_store else None
        self.pool = JobPool(self.settings.workers, self.settings.max_queue, store.jobs if store is not None else None)
        self.plans = Plans(self.settings.plan_ttl, store.plans if store is not None else None,
                           lambda text: parse(text, config))
        self._stopping = threading.Event()
        if store is not None:  # a replica that dies with a job leaves its row: another one says so
            threading.Thread(target=self._lost_jobs_loop, name="specops-lost-jobs", daemon=True).start()
        self.services.attach_notifier(SlackNotifier(self), self.diagnose_for_incident)
        self._seen_events: OrderedDict[str, float] = OrderedDict()
        self._seen_lock = threading.Lock()
        signed = bool(secrets.slack_signing_secret)  # HTTP mode; Socket Mode has no signatures (the token is the auth)
        # Listeners only parse, authorize, audit and hand work to our pool, so they run in the request's own
        # thread and the ack leaves when they return: no queue on bolt's 5 listener threads, no 10 ms ack polling.
        self.app = App(client=self.client, signing_secret=secrets.slack_signing_secret or "unused-in-socket-mode",
                       token_verification_enabled=False, request_verification_enabled=signed,
                       process_before_response=True)
        self._register()

    # --- listeners -------------------------------------------------------------------------------

    def _register(self) -> None:
        self.app.middleware(self._reject_malformed_actions)
        self.app.command(re.compile(r"^/specops"))(self._on_slash)
        self.app.event("app_mention")(self._on_mention)
        self.app.shortcut(shortcut.CALLBACK_ID)(self._on_shortcut)
        self.app.view(shortcut.CALLBACK_ID)(self._on_diagnose_view)
        self.app.action("plan_confirm")(self._on_confirm)
        self.app.action("plan_cancel")(self._on_plan_cancel)
        self.app.action("job_cancel")(self._on_job_cancel)
        for action in ("incident_ack", "incident_rediagnose", "incident_rollback", "incident_resolve"):
            self.app.action(action)(self._on_incident)

    def _reject_malformed_actions(self, body: dict[str, Any], next: Callable[[], BoltResponse]) -> BoltResponse:
        """A button value ours never carries is a forged or broken request: 400, and its audit row closed."""
        if isinstance(body, dict) and body.get("type") == "block_actions":
            for action in body.get("actions") or []:
                rule = ACTION_VALUES.get(str(action.get("action_id", "")))
                if rule is not None and not rule.fullmatch(str(action.get("value", ""))):
                    team, user, channel, _, value = self._who(body)
                    audit = self.chat.begin(Who("button", user, team, channel),
                                            f"{action.get('action_id')} {value[:80]}")
                    self.chat.end(audit, "bad request", "malformed button value")
                    return BoltResponse(status=400, body="malformed button value")
        return next()

    def _on_slash(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        team, user, channel = body.get("team_id"), str(body.get("user_id", "")), str(body.get("channel_id", ""))
        text = str(body.get("text", ""))

        def reply(message: str) -> None:
            ack(text=self.redactor.text(message))

        trigger = str(body.get("trigger_id") or "")
        if trigger:  # one invocation, one trigger id: a replay that lands on another replica is answered only
            try:
                taken = self._taken_elsewhere(f"command:{trigger}", text)
            except StoreDown as down:
                reply(str(down))
                return
            if taken is not None:
                reply(f"`/specops {text}`"[:200] + f" is already being handled (by {taken}); it runs once.")
                return
        self.handle_text(text, team=team, user=user, channel=channel, thread_ts=None, reply=reply, source="slash")

    def _on_mention(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        key = str(body.get("event_id") or event.get("client_msg_id") or event.get("ts"))
        if not self._first_time(key):
            return  # Slack retried a delivery we already handled (HTTP mode and Socket Mode alike)
        try:
            if self._taken_elsewhere(f"event:{key}", "app_mention") is not None:
                return  # another replica took this delivery (Socket Mode spreads them; a retry may land here)
        except StoreDown as down:
            channel = str(event.get("channel", ""))
            self.sink.post(channel, str(down), thread_ts=str(event.get("thread_ts") or event.get("ts") or "") or None)
            self._forget(key)
            return
        try:
            self._mention(body, event)
        except BaseException:
            self._forget(key)  # it did not go through: let Slack's retry try again
            self._forget_shared(f"event:{key}")
            raise

    def _taken_elsewhere(self, key: str, what: str) -> str | None:
        """Which replica already took this delivery, or None if this one is the first (in the shared store).
        StoreDown if the store cannot say: nothing runs unaudited."""
        try:
            return self.services.store.deliveries.first(key, what)
        except Exception as error:  # the database's own error types are the store's (adapters never import it)
            raise StoreDown(self.redactor.text(
                f"state store unavailable: nothing runs now (it would run unaudited): "
                f"{str(error).splitlines()[0][:200] if str(error) else type(error).__name__}")) from None

    def _forget_shared(self, key: str) -> None:
        try:
            self.services.store.deliveries.forget(key)
        except Exception as error:
            log.warning("could not forget delivery %s: %s", key, error)

    def _forget(self, key: str) -> None:
        with self._seen_lock:
            self._seen_events.pop(key, None)

    def _mention(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        channel = str(event.get("channel", ""))
        thread_ts = str(event.get("thread_ts") or event.get("ts") or "") or None
        user = str(event.get("user", ""))
        text = MENTION.sub(" ", str(event.get("text", ""))).strip()
        files = [f for f in event.get("files") or [] if isinstance(f, dict)]

        def reply(message: str) -> None:
            self.sink.post(channel, message, thread_ts=thread_ts)

        self.handle_text(text, team=body.get("team_id") or event.get("team"), user=user, channel=channel,
                         thread_ts=thread_ts, reply=reply, source="mention", files=files)

    def _first_time(self, key: str) -> bool:
        with self._seen_lock:
            if key in self._seen_events:
                return False
            self._seen_events[key] = time.time()
            while len(self._seen_events) > 2000:
                self._seen_events.popitem(last=False)
            return True

    # --- commands --------------------------------------------------------------------------------

    def handle_text(self, text: str, *, team: str | None, user: str, channel: str, thread_ts: str | None,
                    reply: Callable[[str], None], source: str, files: Sequence[dict[str, Any]] = ()) -> None:
        def may_run(cmd: Command) -> str | None:
            if cmd.destructive_verb and not self.auth.may_deploy(team, user):
                return (f"Sorry <@{user}>, you are not allowed to `{cmd.verb}`. Ask someone in the deployers group, "
                        "or an admin to add you to `slack.deployers` in the specops config.")
            return None

        decision = self.chat.decide(text, Who(source, user, team, channel), team_ok=self.auth.team_ok(team),
                                    may_run=may_run, attachments=len(files))
        if decision.next == "reply":
            reply(decision.text)
            return
        cmd, audit = decision.command, decision.audit
        assert cmd is not None
        if decision.next == "confirm":
            plan = self.plans.new(cmd, team, user, channel, thread_ts)
            try:
                self.pool.submit_task(lambda: self._post_plan(plan, audit))
            except Busy:
                reply("specops is busy with other jobs right now; try again in a minute.")
                self.chat.end(audit, "busy", cmd.text())
                return
            reply(f"Preparing the plan for `{cmd.text()}`; confirm it in the channel.")
            return
        if cmd.paste is not None:
            if not self._submit_paste(cmd, user, channel, thread_ts, audit, files):
                reply("specops is busy with other jobs right now; try again in a minute.")
                return
            reply(f"Reading the log: `{cmd.text()}`…")
            return
        try:
            self.pool.submit(lambda job: self._run_job(job, channel, thread_ts, audit, plan=None), cmd, user,
                             on_error=self._job_failed(channel, thread_ts, audit))
        except Busy:
            reply("specops is busy with other jobs right now; try again in a minute.")
            self.chat.end(audit, "busy", cmd.text())
            return
        reply(f"Working on `{cmd.text()}`…")

    def _post_plan(self, plan: Plan, audit: AuditRow) -> None:
        cmd = plan.command
        try:
            preview = self.chat.plan(cmd, owner=f"{plan.user} via slack", audit=audit)
        except SpecopsError as exc:
            self.sink.post(plan.channel, f"Cannot plan `{cmd.text()}`: {exc}", thread_ts=plan.thread_ts)
            self.chat.end(audit, "error", str(exc))
            return
        _, blocks = blocks_of(render(preview, "slack").text)
        if refused_before_launch(preview):  # nothing to confirm: the deploy would stop at its checks
            self.plans.settle(plan.id, "refused")
            self.sink.post(plan.channel, getattr(preview, "headline", ""), ui.refused_plan_blocks(plan, blocks),
                           thread_ts=plan.thread_ts)
            self.chat.end(audit, "refused", f"plan {plan.id}: {cmd.text()}: refused before launch")
            return
        blocks = ui.plan_blocks(plan, blocks, self.settings.plan_ttl)
        plan.message_ts = self.sink.post(plan.channel, f"Plan: {cmd.text()} — confirm or cancel", blocks,
                                         thread_ts=plan.thread_ts)
        self.plans.posted(plan)
        self.chat.end(audit, "planned", f"plan {plan.id}: {cmd.text()}")

    # --- a pasted or attached log ------------------------------------------------------------------

    def _submit_paste(self, cmd: Command, user: str, channel: str, thread_ts: str | None, audit: AuditRow,
                      files: Sequence[dict[str, Any]]) -> bool:
        try:
            self.pool.submit(lambda job: self._run_paste(job, channel, thread_ts, audit, list(files)), cmd, user,
                             on_error=self._job_failed(channel, thread_ts, audit))
        except Busy:
            self.chat.end(audit, "busy", cmd.text())
            return False
        return True

    def _job_failed(self, channel: str, thread_ts: str | None, audit: AuditRow) -> JobError:
        """What a job that raised does last: its audit row closed (unless chat.run already closed it) and a
        short reply, so nobody waits on a job that is gone."""
        def failed(job: Job, exc: Exception) -> None:
            if not job.recorded:
                self.chat.end(audit, "error", f"internal error: {type(exc).__name__}")
            self.sink.post(channel, f":x: {job.command.text()}: internal error ({type(exc).__name__})",
                           thread_ts=thread_ts)
        return failed

    def _run_paste(self, job: Job, channel: str, thread_ts: str | None, audit: AuditRow,
                   files: list[dict[str, Any]]) -> None:
        """In the job: read the attached files, diagnose them with the pasted text, post it all in the thread."""
        cmd = job.command
        assert cmd.paste is not None
        read: list[PastedFile] = []
        refused: list[str] = []
        for file in files:
            try:
                read.append(self.files.read(file))
            except FileRefused as exc:
                refused.append(str(exc))
        if refused:
            self.sink.post(channel, "\n".join(f":no_entry_sign: {why}" for why in refused), thread_ts=thread_ts)
        if not cmd.paste.text.strip() and not read:
            job.recorded = True
            self.chat.end(audit, "refused", "; ".join(refused) or "nothing to read")
            if not refused:
                self.sink.post(channel, "There is no log text to diagnose here.", thread_ts=thread_ts)
            return
        job.recorded = True  # chat.run closes the row, whatever happens in it
        try:
            report = self.chat.run(cmd, audit, f"{job.requester} via slack", files=read)
        except SpecopsError as exc:
            self.sink.post(channel, f":x: {cmd.text()}: {exc}", thread_ts=thread_ts)
            return
        except Exception as exc:  # a bug: tell the thread briefly, keep the details in the (redacted) log
            log.exception("job %s failed", cmd.text())
            self.sink.post(channel, f":x: {cmd.text()}: internal error ({type(exc).__name__})", thread_ts=thread_ts)
            return
        self.post_report(report, channel, thread_ts)

    def _on_shortcut(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        """"Diagnose with specops" on a message: ack at once; the modal is opened from the pool (no Web API call
        before the ack), the message waits in memory (never in the modal, never on disk)."""
        ack()
        user = body.get("user") or {}
        team = user.get("team_id") or (body.get("team") or {}).get("id")
        channel = str((body.get("channel") or {}).get("id", ""))
        message = body.get("message") or {}
        ts = str(message.get("ts") or body.get("message_ts") or "")
        trigger = str(body.get("trigger_id") or "")
        waiting = shortcut.WaitingMessage(
            team, str(user.get("id", "")), channel, str(message.get("thread_ts") or ts),
            MENTION.sub(" ", str(message.get("text") or "")).strip(),
            [f for f in message.get("files") or [] if isinstance(f, dict)])
        ok = self.auth.team_ok(team) and bool(channel and ts and trigger)

        def open_modal() -> None:
            if not ok:
                self.sink.ephemeral(channel, waiting.user, "specops cannot diagnose this message here.")
                return
            key = self.waiting.put(waiting)
            self.sink.open_view(trigger, shortcut.modal(key, waiting))

        try:
            self.pool.submit_task(open_modal)
        except Busy:
            threading.Thread(target=lambda: self.sink.ephemeral(
                channel, waiting.user, "specops is busy with other jobs right now; try again in a minute."),
                daemon=True).start()

    def _on_diagnose_view(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        """The modal's submission: bad fields are answered in the modal, else it closes and the diagnosis runs."""
        view = body.get("view") or {}
        options, errors = shortcut.submitted_options(view)
        if errors:
            ack(response_action="errors", errors=errors)
            return
        ack()
        user = body.get("user") or {}
        team, user_id = user.get("team_id") or (body.get("team") or {}).get("id"), str(user.get("id", ""))
        key, _, channel = str(view.get("private_metadata") or "").partition(" ")
        waiting = self.waiting.pop(key)
        if waiting is None or waiting.user != user_id:
            self.chat.queue(Who("shortcut", user_id, team, channel or None), "diagnose (a message)", result="refused",
                            closed=True, detail="the message is no longer known (the bot restarted?)")
            if channel:
                try:
                    self.pool.submit_task(lambda: self.sink.ephemeral(
                        channel, user_id, "specops lost track of that message (it restarted?): use the shortcut "
                                          "again."))
                except Busy:
                    pass
            return
        decision = self.chat.decide_message(waiting.text, options, Who("shortcut", user_id, team, waiting.channel),
                                            team_ok=self.auth.team_ok(team), attachments=len(waiting.files))
        cmd = decision.command

        def tell(text: str) -> None:
            try:
                self.pool.submit_task(lambda: self.sink.ephemeral(waiting.channel, user_id, text,
                                                                  thread_ts=waiting.thread_ts))
            except Busy:
                pass

        if decision.next != "run" or cmd is None or cmd.paste is None:
            tell(decision.text or "specops cannot diagnose this message.")
            return
        if not self._submit_paste(cmd, user_id, waiting.channel, waiting.thread_ts, decision.audit, waiting.files):
            tell("specops is busy with other jobs right now; try again in a minute.")

    # --- buttons ---------------------------------------------------------------------------------

    @staticmethod
    def _who(body: dict[str, Any]) -> tuple[str | None, str, str, str | None, str]:
        user = body.get("user") or {}
        team = user.get("team_id") or (body.get("team") or {}).get("id")
        channel = str((body.get("channel") or {}).get("id", ""))
        message_ts = (body.get("message") or {}).get("ts") or (body.get("container") or {}).get("message_ts")
        value = str(((body.get("actions") or [{}])[0]).get("value", ""))
        return team, str(user.get("id", "")), channel, message_ts, value

    def _on_confirm(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        ack()
        team, user, channel, _, plan_id = self._who(body)
        audit = self.chat.begin(Who("button", user, team, channel), f"confirm plan {plan_id}", plan_id=plan_id)
        plan = self.plans.get(plan_id)
        if plan is None:
            self.sink.ephemeral(channel, user, "This plan is unknown (the bot restarted?): ask again.")
            self.chat.end(audit, "refused", "unknown plan")
            return
        requester = user == plan.user and team == plan.team and self.auth.may_deploy(team, user)
        if not (requester or self.auth.may_approve(team, user)):
            self.sink.ephemeral(channel, user, f"Only <@{plan.user}> (while a deployer) or an approver can confirm "
                                               "this plan.")
            self.chat.end(audit, "refused", "not the requester or an approver")
            return
        settled, why = self.plans.settle(plan_id, "confirmed")
        if settled is None:
            self.sink.ephemeral(channel, user, why)
            self.chat.end(audit, "refused", why)
            return
        try:
            # the job's shared row (named by the plan) is written before the press is answered "running": a replica
            # that dies from here on leaves it, and another one says so in the plan's thread
            self.pool.submit(lambda job: self._run_job(job, plan.channel, plan.thread_ts, audit, plan=plan),
                             plan.command, plan.user, on_error=self._job_failed(plan.channel, plan.thread_ts, audit),
                             job_id=plan_id)
        except Busy:
            self.sink.post(plan.channel, "specops is busy; the plan was not run. Ask again in a minute.",
                           thread_ts=plan.thread_ts)
            self.chat.end(audit, "busy", plan.command.text())
            return
        if plan.message_ts:
            self.sink.update(plan.channel, plan.message_ts, f"Confirmed by <@{user}>: {plan.command.text()}",
                             ui.settled_blocks(plan, f":white_check_mark: Confirmed by <@{user}>; running."))

    def _on_plan_cancel(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        ack()
        team, user, channel, _, plan_id = self._who(body)
        audit = self.chat.begin(Who("button", user, team, channel), f"cancel plan {plan_id}", plan_id=plan_id)
        plan = self.plans.get(plan_id)
        if plan is None or not ((user == plan.user and team == plan.team) or self.auth.may_approve(team, user)):
            self.sink.ephemeral(channel, user, "Only the requester or an approver can cancel this plan.")
            self.chat.end(audit, "refused", "not allowed")
            return
        settled, why = self.plans.settle(plan_id, "cancelled")
        if settled is None:
            self.sink.ephemeral(channel, user, why)
            self.chat.end(audit, "refused", why)
            return
        if plan.message_ts:
            self.sink.update(plan.channel, plan.message_ts, f"Cancelled: {plan.command.text()}",
                             ui.settled_blocks(plan, f":no_entry_sign: Cancelled by <@{user}>; nothing ran."))
        self.chat.end(audit, "cancelled", plan.command.text())

    def _on_job_cancel(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        ack()
        team, user, channel, _, job_id = self._who(body)
        audit = self.chat.begin(Who("button", user, team, channel), f"cancel job {job_id}")
        job = self.pool.get(job_id)
        if job is None:
            self._cancel_elsewhere(job_id, team, user, channel, audit)
            return
        if not ((user == job.requester and self.auth.team_ok(team)) or self.auth.may_approve(team, user)):
            self.sink.ephemeral(channel, user, "Only the requester or an approver can cancel this job.")
            self.chat.end(audit, "refused", "not allowed")
            return
        job.cancel.set()
        self.chat.end(audit, "ok", f"cancel requested for {job.command.text()}")

    def _cancel_elsewhere(self, job_id: str, team: str | None, user: str, channel: str, audit: AuditRow) -> None:
        """A Cancel press for a job this replica does not run: recorded for the replica that runs it."""
        store = self.services.store if self.services.shared_store else None
        try:
            job = store.jobs.running(job_id) if store is not None else None
        except StoreUnavailable as exc:
            self.sink.ephemeral(channel, user, f"state store unavailable: the cancel was not recorded: {exc}")
            self.chat.end(audit, "error", "state store unavailable")
            return
        if store is None or job is None:
            plan = self.plans.get(job_id) if store is not None else None  # a confirmed job's id is its plan's
            lost = plan is not None and plan.state == "lost"
            self.sink.ephemeral(channel, user, "That job's replica is gone: it stopped before the job finished (the "
                                               "plan's thread says so); it is not running. `specops status` shows "
                                               "what the host runs now." if lost else "That job has already finished.")
            self.chat.end(audit, "refused", "its replica is gone" if lost else "no such job")
            return
        if not ((user == job.requester and self.auth.team_ok(team)) or self.auth.may_approve(team, user)):
            self.sink.ephemeral(channel, user, "Only the requester or an approver can cancel this job.")
            self.chat.end(audit, "refused", "not allowed")
            return
        if not job.replica_alive:
            silent = "never beat" if job.replica_silent is None else f"last beat {spoken(job.replica_silent)} ago"
            self.sink.ephemeral(channel, user, f"That job ran on replica {job.replica}, which is gone ({silent}); "
                                               "it is not running. `specops status` shows what the host runs now.")
            store.jobs.finished(job_id)
            self.chat.end(audit, "refused", f"its replica {job.replica} is gone")
            return
        if job.cancel_by:
            self.sink.ephemeral(channel, user, f"<@{job.cancel_by}> already asked to cancel it; replica {job.replica}, "
                                               "which runs it, is stopping it.")
            self.chat.end(audit, "ok", f"cancel already requested for {job.command}")
            return
        if not store.jobs.request_cancel(job_id, user):
            self.sink.ephemeral(channel, user, "That job has already finished.")
            self.chat.end(audit, "refused", "no such job")
            return
        self.chat.end(audit, "ok", f"cancel requested for {job.command} (running on replica {job.replica})")

    # --- incidents -------------------------------------------------------------------------------

    @property
    def incidents(self) -> IncidentManager:
        return self.services.manager

    def diagnose_for_incident(self, host: str) -> Report:
        svc = self.services
        return ops.diagnose_host(ops.HostRequest(self.config, host, probe=False, owner="specops incident",
                                                 store=svc.store, hosts=svc.hosts))

    def _on_incident(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        ack()
        team, user, channel, _, value = self._who(body)
        action = str(((body.get("actions") or [{}])[0]).get("action_id", ""))
        audit = self.chat.begin(Who("button", user, team, channel), f"{action} {value}")
        inc = self.incidents.get(int(value)) if value.isdigit() else None
        if inc is None or not self.auth.team_ok(team):
            self.sink.ephemeral(channel, user, "This incident is unknown here.")
            self.chat.end(audit, "refused", "unknown incident")
            return
        if not self.auth.may_handle_incidents(team, user, self.config.watch.oncall_usergroup):
            self.sink.ephemeral(channel, user, "Only the on-call group, deployers and approvers act on incidents.")
            self.chat.end(audit, "refused", "not on call")
            return
        if inc.state == "resolved":
            # a stale button on a closed incident: nothing changes and the closed thread gets no post
            self.sink.ephemeral(channel, user, f"Incident #{inc.id} is already resolved.")
            self.chat.end(audit, "refused", "incident already resolved")
            return
        thread = inc.ts
        if action == "incident_ack":
            inc = self.incidents.acknowledge(inc.id, user) or inc
            self.sink.post(inc.channel or channel, f":eyes: Acknowledged by <@{user}>.", thread_ts=thread)
        elif action == "incident_resolve":
            self.incidents.resolve_incident(inc.id, f"Resolved by <@{user}>.", f"slack:{user}")
        elif action == "incident_rediagnose":
            def rediagnose() -> None:
                try:
                    report = self.diagnose_for_incident(inc.host)
                except SpecopsError as exc:
                    self.sink.post(inc.channel or channel, f"Re-diagnosis failed: {exc}", thread_ts=thread)
                    return
                self.post_report(report, inc.channel or channel, thread)
            try:
                self.pool.submit_task(rediagnose)
            except Busy:
                self.sink.ephemeral(channel, user, "specops is busy; try again in a minute.")
        elif action == "incident_rollback":
            profile = self.config.watch.rollback_profile
            if profile not in self.config.profiles:
                self.sink.ephemeral(channel, user, f"No `{profile}` profile to roll back to (watch.rollback_profile).")
                self.chat.end(audit, "refused", "no rollback profile")
                return
            if not self.auth.may_deploy(team, user):
                self.sink.ephemeral(channel, user, "Rolling back is a deploy: only deployers can ask for it.")
                self.chat.end(audit, "refused", "not a deployer")
                return
            plan = self.plans.new(Command("deploy", inc.host, profile), team, user, inc.channel or channel, thread)
            try:
                self.pool.submit_task(lambda: self._post_plan(plan, audit))
            except Busy:
                self.sink.ephemeral(channel, user, "specops is busy; try again in a minute.")
                self.chat.end(audit, "busy", "rollback")
            return
        self.chat.end(audit, "ok", f"{action} incident #{inc.id}")

    # --- jobs ------------------------------------------------------------------------------------

    def _run_job(self, job: Job, channel: str, thread_ts: str | None, audit: AuditRow, plan: Plan | None) -> None:
        cmd = job.command
        cancellable = cmd.cancellable
        started = time.monotonic()
        title = f"`{cmd.text()}`"
        progress_ts = self.sink.post(channel, f"{cmd.text()}: starting",
                                     ui.progress_blocks(title, "starting…", job.id if cancellable else None),
                                     thread_ts=thread_ts)

        def edit(lines: str) -> None:
            if progress_ts:
                self.sink.update(channel, progress_ts, f"{cmd.text()}: {lines}",
                                 ui.progress_blocks(title, lines, job.id if cancellable else None))

        live = _LiveProgress(self.settings.progress_interval, edit)
        owner = f"{job.requester} via slack"
        job.recorded = True  # chat.run closes the row, whatever happens in it
        try:
            try:
                report = self.chat.run(cmd, audit, owner, progress=live.offer, cancel=job.cancel,
                                       note=f" (plan {plan.id})" if plan else "")
            finally:
                live.close()  # a line still waiting must not overwrite the final edit
        except SpecopsError as exc:
            message = f":x: {cmd.text()}: {exc}"
            self._finish(channel, progress_ts, thread_ts, message, title)
            return
        except Exception as exc:  # a bug: tell the channel briefly, keep the details in the (redacted) log
            log.exception("job %s failed", cmd.text())
            self._finish(channel, progress_ts, thread_ts, f":x: {cmd.text()}: internal error ({type(exc).__name__})",
                         title)
            return
        elapsed = time.monotonic() - started
        icon, said = summary_of(report)
        summary = f"{icon} {cmd.text()}: {said} ({elapsed:.0f} s) — report in the thread"
        self._finish(channel, progress_ts, thread_ts, summary, title)
        # a reply goes to the thread's parent (Slack: never a reply's ts): the mention's thread, else the progress
        self.post_report(report, channel, thread_ts or progress_ts)

    def _finish(self, channel: str, progress_ts: str | None, thread_ts: str | None, message: str,
                title: str) -> None:
        if progress_ts:
            self.sink.update(channel, progress_ts, message, ui.progress_blocks(title, message, None))
        else:
            self.sink.post(channel, message, thread_ts=thread_ts)

    def post_report(self, result: object, channel: str, thread_ts: str | None,
                    chart_png: bytes | None = None) -> str | None:
        """Any verb's result in the thread, by its type (the renderer the console and the CLI use), and its
        files. `chart_png`: a chart the caller drew (the health report's trend) instead of the result's."""
        rendered = render(result, "slack")
        text, blocks = blocks_of(rendered.text)
        ts = self.sink.post(channel, text, blocks, thread_ts=thread_ts)
        files = files_of(result, rendered)
        if chart_png is not None:
            self.sink.upload(channel, thread_ts or ts, *_named(trend_file(result), chart_png))
            files = [f for f in files if not f[0].endswith(".png")]
        for name, content, title in files:
            self.sink.upload(channel, thread_ts or ts, name, content, title)
        return ts

    def deliver_report(self, result: object, channel: str, chart_png: bytes | None = None,
                       resume_ts: str | None = None,
                       on_posted: Callable[[str, str], None] | None = None) -> bool:
        """One report, one top-level message, whatever fails on the way: `on_posted(channel, ts)` is told as
        soon as the message exists, and a retry given that `resume_ts` edits it and goes on with the files in
        its thread instead of posting a second copy. True once every part is there."""
        rendered = render(result, "slack")
        text, blocks = blocks_of(rendered.text)
        if resume_ts is not None:
            if not self.sink.update(channel, resume_ts, text, blocks):
                return False  # tried again later, still on this message
            ts = resume_ts
        else:
            posted = self.sink.post(channel, text, blocks)
            if posted is None:
                return False
            ts = posted
            if on_posted is not None:
                on_posted(channel, ts)
        files = files_of(result, rendered)
        if chart_png is not None:
            files = [_named(trend_file(result), chart_png),
                     *(f for f in files if not f[0].endswith(".png"))]
        # all() stops at the first failed upload: the rest waits for the retry, which starts again at the files
        return all(self.sink.upload(channel, ts, name, content, title) for name, content, title in files)

    def _lost_jobs_loop(self) -> None:
        store = self.services.store
        every = max(1.0, store.lease / 2)
        while not self._stopping.wait(every):
            try:
                lost = store.jobs.lost(store.lease)
            except Exception as exc:  # the store is away: the next round tries again
                log.warning("could not look for jobs of stopped replicas: %s", exc)
                continue
            for job in lost:
                self._say_lost(job)

    def _say_lost(self, job: LostJob) -> None:
        log.warning("job %s (%s) was lost with replica %s", job.id, job.command, job.replica)
        if job.channel is None:
            return
        said = (f":warning: `{job.command}` was confirmed, but the replica running it ({job.replica}) stopped before "
                "it finished: it did not complete, and nothing runs it again. Check the host (`/specops status`) — "
                "what a deploy left there is in its report once it is diagnosed — then ask for a new plan.")
        self.sink.post(job.channel, said, thread_ts=job.thread_ts or job.message_ts)

    def shutdown(self) -> None:
        self._stopping.set()
        self.auth.stop()
        self.pool.shutdown()
        if self._owns_services:
            self.services.close()


class _LiveProgress:
    """One job's progress message: what it says and when it is edited.

    It says the latest line of each step still running, in step order (a rollout's canary hosts run side by side,
    each its own step: one line named only the last to speak), and each step that ended since the last edit
    (a host's gate verdict is shown even when the next host starts at once). chat.update is Tier 3: at most one
    edit per interval; a report that comes sooner is not dropped but sent, with whatever came after it, once the
    interval is up (a rollout's host says a step, then nothing for the whole soak). The edits go one at a time,
    in order, from whichever thread reports; none after `close`."""

    MAX_LINES = 8

    def __init__(self, interval: float, send: Callable[[str], None]) -> None:
        self.interval = interval
        self._send = send
        self._last = -math.inf
        self._lock = threading.Lock()
        self._running: dict[tuple[int, int, str], Progress] = {}
        self._ended: dict[tuple[int, int, str], Progress] = {}  # since the last edit, oldest first
        self._waiting: str | None = None
        self._timer: threading.Timer | None = None
        self._closed = False

    def offer(self, p: Progress) -> None:
        with self._lock:
            if self._closed:
                return
            text = self._text(p)
            wait = self._last + self.interval - time.monotonic()
            if wait <= 0:
                self._waiting = None
                self._sent(text)
                return
            self._waiting = text
            if self._timer is None:
                self._timer = threading.Timer(wait, self._flush)
                self._timer.daemon = True
                self._timer.start()

    def _text(self, p: Progress) -> str:
        key = (p.step, p.total, p.name)
        self._running.pop(key, None)
        self._ended.pop(key, None)
        (self._running if p.status == "running" else self._ended)[key] = p
        # p first, then what still runs (in step order), then what ended latest: at most MAX_LINES
        others = [*(q for q in sorted(self._running.values(), key=lambda q: q.step) if q is not p),
                  *(q for q in reversed(self._ended.values()) if q is not p)]
        kept = sorted([p, *others[:self.MAX_LINES - 1]], key=lambda q: q.step)
        more = len(others) - (self.MAX_LINES - 1)
        return "\n".join(q.line() for q in kept) + (f"\n… and {more} more" if more > 0 else "")

    def _flush(self) -> None:
        with self._lock:
            self._timer = None
            text, self._waiting = self._waiting, None
            if text is not None and not self._closed:
                self._sent(text)

    def _sent(self, text: str) -> None:
        self._last = time.monotonic()
        self._ended.clear()
        try:
            self._send(text)
        except Exception:  # a progress edit never fails the job (the sink logs Slack's own errors)
            log.exception("progress edit failed")

    def close(self) -> None:
        """No edit after this returns: the job's last word is its own."""
        with self._lock:
            self._closed = True
            self._waiting = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None


def _named(file: tuple[str, str], content: bytes) -> tuple[str, bytes, str]:
    """(name, title) and the bytes, in the order an upload takes them."""
    return file[0], content, file[1]

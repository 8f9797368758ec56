"""One error hierarchy for specops; every class carries the CLI exit code it maps to.

    SpecopsError                      exit 1   a user-facing failure: its message is the whole story
    ├── UserError                     exit 2   bad input: the user can fix it by changing what they typed
    │   ├── InputError                         a bad argument or file (bot.app)
    │   ├── ConfigError                        the config file (bot.config)
    │   ├── CommandError                       a chat command that does not parse (bot.app.commands)
    │   └── PlaybookError                      a playbook that does not validate or render (bot.engine)
    ├── OperationError                exit 1   the operation ran and failed
    │   ├── SSHError                           the host could not be reached or a remote call failed (bot.remote)
    │   ├── LockHeld                           another operation holds the host's lock (bot.store)
    │   ├── StoreUnavailable                   the state store cannot be opened or written now (bot.store)
    │   │   └── StoreRefused                   ... and waiting cannot help: a refused password, a missing database
    │   ├── MigrationFailed                    a schema migration failed and was rolled back (bot.store)
    │   └── Busy                               the job pool is full (bot.adapters.slack)
    └── StartError                    exit 69  `serve` could not start: Slack (or the network) stayed unavailable
        │                                      for the whole start budget (EX_UNAVAILABLE; systemd restarts it)
        ├── StartConfigError          exit 78  what a restart cannot fix: a missing secret, a token Slack refused,
        │                                      an address that cannot be bound (EX_CONFIG; the unit stops there)
        └── ListenBusy                exit 75  the port is in use, for now (EX_TEMPFAIL; systemd restarts it)

`serve`'s exit codes are sysexits(3)'s, for the service manager: 78 means "fix the config", 69/75 "try again".

Anything else reaching an adapter is a bug: it is logged with its traceback and the user sees
"internal error" (exit 70, EX_SOFTWARE). A KeyboardInterrupt exits 130.
"""

from __future__ import annotations


class SpecopsError(Exception):
    exit_code = 1


class UserError(SpecopsError):
    exit_code = 2


class OperationError(SpecopsError):
    exit_code = 1


class StoreUnavailable(OperationError):
    """The state store cannot be opened: a server that does not answer, a refused password, a missing password."""


class StoreRefused(StoreUnavailable):
    """The state store's server answered and refused (a password, a database or role that does not exist, no
    password given): a retry cannot help."""


class MigrationFailed(OperationError):
    """A schema migration failed at open: rolled back, the schema is as it was, the store does not open."""


EX_UNAVAILABLE = 69
EX_TEMPFAIL = 75
EX_CONFIG = 78


class StartError(SpecopsError):
    exit_code = EX_UNAVAILABLE


class StartConfigError(StartError):
    """The start cannot succeed until someone changes the config or the secrets."""

    exit_code = EX_CONFIG


class ListenBusy(StartError):
    exit_code = EX_TEMPFAIL


class InputError(UserError):
    """Bad input from the user: a short message, never a traceback."""


class ConfigError(UserError):
    """The config file is missing, unreadable or does not validate."""


EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

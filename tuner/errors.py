"""The one exception type that reaches the user as a one-line error and exit code 2."""


class UserError(Exception):
    """Bad input or an unusable environment: the message says what is wrong and what to do.

    The CLI prints ``error: <message>`` on stderr and exits with code 2, never a traceback.
    """

    exit_code = 2


class CompileError(UserError):
    """A config that the compiler for a target refuses (out of resources, unsupported op, a build
    error): the config's row says so with this one-line message where a sweep expects it; elsewhere
    it reaches the user as any UserError. Anything else is a bug and propagates."""


class CompileTimeout(CompileError):
    """A compiler that ran out of time: no verdict on the config (a shipped table never records it)."""


class NoCompilerError(UserError):
    """No compiler at hand builds for the target: a family may fall back to a stated assumption
    (and must say so), or the user is told what to install."""

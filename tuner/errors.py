"""The one exception type that reaches the user as a one-line error and exit code 2."""


class UserError(Exception):
    """Bad input or an unusable environment: the message says what is wrong and what to do.

    The CLI prints ``error: <message>`` on stderr and exits with code 2, never a traceback.
    """

    exit_code = 2


class CompileError(Exception):
    """A config that the compiler for a target refuses (out of resources, unsupported op): the
    config's row says so with this one-line message; anything else is a bug and propagates."""

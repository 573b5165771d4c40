import sys

try:                          # a Ctrl-C while the CLI's modules import: one line and 130, no traceback
    from occtune.cli import main
except KeyboardInterrupt:
    sys.stderr.write("interrupted\n")
    sys.exit(130)

if __name__ == "__main__":
    main()

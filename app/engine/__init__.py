"""The check: capture the CI matrix at head, validate both revisions in the sandbox, judge (check_steps.py
strings the steps together; matrix_capture.py and suite_validation.py are the host sides of the harness)."""

"""One gallery of deliberately broken agents, imported by dotted path (`tests.gallery.<kind>.<name>`, the
repository root on the path):

- ``invalid``: step modules that break the step-module contract or fail to import (refused by ``load``);
- ``variants``: agents that load and run but are wrong in one way a scenario test or a CLI test needs;
- ``mutants``: the reference agent with exactly one of the articles' mistakes, catalogued for detection.
"""

"""Reporting: what a study found, for people (markdown, figures, CSV, the dashboard) and scripts.

:func:`build` writes the report; :func:`recommend` gives the best trial as commands in the study's
dialect; :func:`trial_table` is the pandas table both read; :func:`serve` runs optuna-dashboard;
:func:`verify` runs the recommended command for real and :func:`verified_section` reports it;
:class:`Launch` runs a trainer's command through its own entry point and reads its epoch times.
"""

from speedopt.reporting._bottleneck import Bottleneck, bottleneck_of
from speedopt.reporting._dashboard import check_address, serve, study_page
from speedopt.reporting._filename import ReportFiles, inside, report_files, safe_name
from speedopt.reporting._gather import trial_table, write_csv
from speedopt.reporting._loggers import LoggerIntegration, logger_integrations
from speedopt.reporting._markdown import Written, build
from speedopt.reporting._projection import Projection, project
from speedopt.reporting._recommend import Recommendation, recommend, recommendation
from speedopt.reporting._trainer_run import Launch
from speedopt.reporting._verify import Verification, check_verify_options, verified_section, verify

__all__ = [
    "Bottleneck",
    "Launch",
    "LoggerIntegration",
    "Projection",
    "Recommendation",
    "ReportFiles",
    "Verification",
    "Written",
    "build",
    "check_address",
    "check_verify_options",
    "bottleneck_of",
    "inside",
    "logger_integrations",
    "project",
    "recommend",
    "recommendation",
    "report_files",
    "safe_name",
    "serve",
    "study_page",
    "trial_table",
    "verified_section",
    "verify",
    "write_csv",
]

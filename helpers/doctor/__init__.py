"""The doctor: `record` watches a step, `verdicts` says why, `report` shows, `checkup`: doctor()."""

from helpers.doctor.checkup import Checkup, doctor
from helpers.doctor.record import Location
from helpers.doctor.verdicts import CAUSES, Finding

__all__ = ["CAUSES", "Checkup", "Finding", "Location", "doctor"]

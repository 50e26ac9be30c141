"""The reports a run left in its report directory (`--report-dir`, CUMEMAUDIT_REPORT_DIR): the one place the
tests find and read `cumemaudit.*.json`.

    from report_dir import ReportDir
    ReportDir(tmp).only()          # the one report (fails unless there is exactly one)
    ReportDir(tmp).reports()       # path -> report, sorted by path
"""
import glob
import json
import os

from cases import expect


class ReportDir:
    def __init__(self, path):
        self.path = path

    def files(self):
        """The report files, sorted (the directory's name may hold glob characters)."""
        return sorted(glob.glob(os.path.join(glob.escape(self.path), "cumemaudit.*.json")))

    @staticmethod
    def read(path):
        """One report, read as UTF-8 (a report that is not valid UTF-8 fails here)."""
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))

    def reports(self):
        return {f: self.read(f) for f in self.files()}

    def only_file(self):
        files = self.files()
        expect(len(files) == 1, f"expected one report in {self.path}, found {files}")
        return files[0]

    def only(self):
        return self.read(self.only_file())

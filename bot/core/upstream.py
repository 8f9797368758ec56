"""Upstream threads (pull requests and issues) as the knowledge base records them and as reports link them: one
model, its link derived from the repository, the number and the kind."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, computed_field


class Upstream(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True)  # shared by the knowledge base and every report

    repo: str
    number: int
    kind: str = "pull"
    state: str
    title: str | None = None  # the thread's own title, where we checked it
    about: str | None = None  # our words, where we did not
    first_release: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{'pull' if self.kind == 'pull' else 'issues'}/{self.number}"

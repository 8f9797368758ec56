"""Upstream threads (pull requests and issues) as the knowledge base records them and as reports link them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Upstream(BaseModel):
    model_config = ConfigDict(defer_build=True)

    repo: str
    number: int
    url: str
    state: str
    kind: str = "pull"
    title: str | None = None  # the thread's own title, where we checked it
    about: str | None = None  # our words, where we did not
    first_release: str | None = None


class UpstreamRef(BaseModel):
    model_config = ConfigDict(defer_build=True)

    repo: str
    number: int
    kind: str = "pull"
    state: str
    title: str | None = None
    about: str | None = None
    first_release: str | None = None

    def to_upstream(self) -> Upstream:
        kind_path = "pull" if self.kind == "pull" else "issues"
        return Upstream(
            repo=self.repo, number=self.number, state=self.state, kind=self.kind, title=self.title,
            about=self.about, first_release=self.first_release,
            url=f"https://github.com/{self.repo}/{kind_path}/{self.number}",
        )

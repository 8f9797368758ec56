"""Slack secrets and endpoints, from the environment (never from the config file or chat)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class SlackSecrets(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    slack_bot_token: str | None = Field(None, description="xoxb-… bot token")
    slack_signing_secret: str | None = Field(None, description="verifies HTTP-mode requests")
    slack_app_token: str | None = Field(None, description="xapp-… token for Socket Mode")
    specops_slack_api_url: str | None = Field(None, description="Web API base URL (a proxy or an emulator)")

    def missing_for(self, http: bool) -> list[str]:
        need = {"SLACK_BOT_TOKEN": self.slack_bot_token}
        if http:
            need["SLACK_SIGNING_SECRET"] = self.slack_signing_secret
        else:
            need["SLACK_APP_TOKEN"] = self.slack_app_token
        return [name for name, value in need.items() if not value]

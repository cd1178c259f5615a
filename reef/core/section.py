"""The base of every configuration section: unknown keys are refused and values are frozen once loaded."""

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """One section of the settings (`--section.key-name`, `section: {key_name: …}`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

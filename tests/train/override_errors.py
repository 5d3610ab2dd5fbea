"""The refusal of one ``env.kwargs.x=TEXT`` override, checked to name it as typed."""

import pytest

from gymcurric.errors import ConfigError
from gymcurric.train.config import apply_overrides


def refused_override(text: str) -> ConfigError:
    """The ConfigError of ``env.kwargs.x=<text>``: its key, the text as typed, the command line."""
    with pytest.raises(ConfigError) as info:
        apply_overrides({}, [f"env.kwargs.x={text}"])
    assert (info.value.key, info.value.value, info.value.source) == (
        "env.kwargs.x",
        text,
        "command line",
    )
    return info.value

"""Ablation with a language model open: switch attention heads off for the prompt's continuation and see what changes
(continuation, token diff, log-probability, and each next token's log-probability and the KL along the prompt), and
how much each head matters over a corpus (the model directory's importance table)."""

import streamlit as st

from app import completion, sessions
from app.page_settings import EXPLORE
from app.shared_settings import SHARED
from app.views.ablation import ablation_lm, head_switches
from viz_model.analysis.ablation import layer_counts

OUTPUT = "continuation"

session = sessions.require_session()
head_switches.heading(OUTPUT, "continue the prompt again",
                      " Along the prompt: how likely each next token is, with and without them.")
completion.prompt_form()
if completion.current_completion(session) is None:
    st.stop()
chosen = head_switches.pick_heads(session.model.config,
                                  ("decoder", layer_counts(session.model.config)["decoder"] - 1, 0))
ran = head_switches.ablated(chosen, "Continuing", lambda: ablation_lm.compute_ablation(
    session.ref.stored, completion.asked_turn(SHARED.sentence.get("")),  # the turn the prompt form asked for
    tuple(chosen), int(EXPLORE.new_tokens.get())))
if ran is not None:
    result, logits = ran
    head_switches.comparison(result, chosen, OUTPUT)
    ablation_lm.logit_change_section(logits, head_switches.off_label(chosen))
head_switches.importance(session, chosen, OUTPUT, "; --src holds prompts, --tgt their continuations")

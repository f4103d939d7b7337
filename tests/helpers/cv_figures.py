"""The context of figures 1 and 2 of the context-variance paper (papers/context-variance-ucm.md), as printed.

Shared by the segmentation and matching/index tests (``tests/datasets/context_variance``); importable as
``cv_figures`` because ``tests/helpers`` is on pytest's ``pythonpath``.
"""

# Figure 2, "Real context", exactly as printed (figure 1 prints the same with OCR noise "[87]").
FIGURE_2_REAL = (
    "[S10] in the past week. There is no shortness of breath [S9], wheeze [S8], chest pain [S7], chest "
    "tightness [S6], hemoptysis [S4], orthopnea or paroxysmal nocturnal dyspnea. There is no heartburn [S2], "
    "sour taste in the mouth or regurgitation, warm sick feeling [S1] in the chest or difficulty swallowing. "
    "There is no sense of smell or taste. There is discolored nasal discharge on the right and on the left. "
    "There is [S3] postnasal drip and throat clearing, and [S5] nasal stuffiness on the left.")
# Figure 2, "Negative-target Real context", exactly as printed.
FIGURE_2_NEGATIVE = (
    "[S10] in the past week. There is no shortness of breath [S9], wheeze [S8], chest pain [S6], chest "
    "tightness [S4], hemoptysis [S2], orthopnea or paroxysmal nocturnal dyspnea. There is no heartburn [S1], "
    "sour taste in the mouth or regurgitation, warm sick feeling in the chest or difficulty swallowing. "
    "There is no sense of smell or taste. There is [S3] discolored nasal discharge on the right and on the "
    "left. There is [S5] postnasal drip and throat clearing, and [S7] nasal stuffiness on the left.")
# The retrieved context of figure 1 without markers; figure 1 goes on with the assessment sentence
# that mentions the subject (figure 2 stops before it).
FIGURE_2_TEXT = (
    "in the past week. There is no shortness of breath, wheeze, chest pain, chest tightness, hemoptysis, "
    "orthopnea or paroxysmal nocturnal dyspnea. There is no heartburn, sour taste in the mouth or "
    "regurgitation, warm sick feeling in the chest or difficulty swallowing. There is no sense of smell or "
    "taste. There is discolored nasal discharge on the right and on the left. There is postnasal drip and "
    "throat clearing, and nasal stuffiness on the left.")
ASSESSMENT = " Assessment: The patient has residual nasal polyp on the left."
FIGURE_1_TEXT = FIGURE_2_TEXT + ASSESSMENT

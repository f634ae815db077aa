"""Page scripts run by st.navigation (see app/streamlit_app.py); not imported as modules."""
